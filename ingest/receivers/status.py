"""google.rpc.Status, the error body of OTLP/HTTP, without a runtime dependency on
googleapis-common-protos (it only comes with the OTel exporters, which are test dependencies).

The message has three fields (`int32 code = 1; string message = 2; repeated Any details = 3`);
we never send details, so the two scalar fields are written in the protobuf wire format by hand.
"""

from __future__ import annotations

import json

# google.rpc.Code values used by the receivers.
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
UNAVAILABLE = 14
UNAUTHENTICATED = 16


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


def status_protobuf(code: int, message: str) -> bytes:
    out = b""
    if code:
        out += b"\x08" + _varint(code)  # field 1, varint
    if message:
        text = message.encode("utf-8")
        out += b"\x12" + _varint(len(text)) + text  # field 2, length-delimited
    return out


def status_json(code: int, message: str) -> bytes:
    return json.dumps({"code": code, "message": message}).encode("utf-8")
