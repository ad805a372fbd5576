"""google.rpc.Status, the error body of OTLP/HTTP and the details of an OTLP/gRPC error, without a
runtime dependency on googleapis-common-protos (it only comes with the OTel exporters, which are
test dependencies).

The messages are small enough to write in the protobuf wire format by hand:
  google.rpc.Status    { int32 code = 1; string message = 2; repeated Any details = 3; }
  google.protobuf.Any  { string type_url = 1; bytes value = 2; }
  google.rpc.RetryInfo { google.protobuf.Duration retry_delay = 1; }
  google.protobuf.Duration { int64 seconds = 1; int32 nanos = 2; }

Back-pressure (the writer is behind, shutting down, or a write failed) is answered with a
RetryInfo detail. OTLP (https://opentelemetry.io/docs/specs/otlp/, "OTLP/gRPC Throttling") says
a server that cannot keep up SHOULD answer UNAVAILABLE and MAY add RetryInfo; RESOURCE_EXHAUSTED
is retryable only with RetryInfo, so we keep it for what retrying cannot fix (an oversize
message). Over HTTP the same answer is 503 with Retry-After (429 would tell one client that it
exceeded its own allowance, which is not what happened: the server as a whole is behind).
"""

from __future__ import annotations

import json

# google.rpc.Code values used by the receivers.
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
UNAVAILABLE = 14
UNAUTHENTICATED = 16

RETRY_INFO_TYPE_URL = "type.googleapis.com/google.rpc.RetryInfo"
# gRPC trailing-metadata keys: the standard one carrying the whole google.rpc.Status (what
# status.FromError / Status.details read in grpc-go and grpc-java), and the RetryInfo alone
# under the key the OpenTelemetry Python gRPC exporter reads (opentelemetry-exporter-otlp-
# proto-grpc 1.45, exporter.py, looks up "google.rpc.retryinfo-bin" and nothing else).
STATUS_DETAILS_KEY = "grpc-status-details-bin"
RETRY_INFO_KEY = "google.rpc.retryinfo-bin"


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int32 negatives are sign-extended to ten bytes on the wire
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def retry_info(retry_after_seconds: int) -> bytes:
    """A serialized google.rpc.RetryInfo asking to wait `retry_after_seconds` before retrying."""
    duration = b"\x08" + _varint(retry_after_seconds) if retry_after_seconds else b""
    return _length_delimited(1, duration)


def status_protobuf(code: int, message: str, retry_after_seconds: int | None = None) -> bytes:
    """A serialized google.rpc.Status; with a RetryInfo detail when a retry delay is given."""
    out = b""
    if code:
        out += b"\x08" + _varint(code)  # field 1, varint
    if message:
        out += _length_delimited(2, message.encode("utf-8"))
    if retry_after_seconds is not None:
        detail = (_length_delimited(1, RETRY_INFO_TYPE_URL.encode("ascii"))
                  + _length_delimited(2, retry_info(retry_after_seconds)))
        out += _length_delimited(3, detail)
    return out


def status_json(code: int, message: str, retry_after_seconds: int | None = None) -> bytes:
    """The proto3 JSON form of status_protobuf (Any as "@type" plus the message's fields)."""
    status: dict[str, object] = {"code": code, "message": message}
    if retry_after_seconds is not None:
        status["details"] = [{"@type": RETRY_INFO_TYPE_URL,
                              "retryDelay": f"{retry_after_seconds}s"}]
    return json.dumps(status).encode("utf-8")
