"""POST /v1/traces and POST /v1/logs as route entries: OTLP/HTTP on top of the HTTP server.

Status codes follow the OTLP specification (https://opentelemetry.io/docs/specs/otlp/, OTLP/HTTP):
200 with an ExportTraceServiceResponse (ExportLogsServiceResponse for logs; partial_success when
spans or records were refused), 400 with a
google.rpc.Status for a body that is not a request, 401 without the bearer token, 413 over the
body limit (counted after decompression), 415 for other content types or encodings, 503 with
Retry-After when the writer is behind or a write failed (exporters retry 503; they must not
retry 400/413/415). The answer is sent only after the spans are committed.

Each OTLP signal is an instance with its own export functions (and response type).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from google.protobuf import json_format

from ingest.receivers.auth import BearerToken
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.http_routes import JSON, PROTOBUF, Head, Reply, Request, status_reply
from ingest.receivers.limits import BadBody, BodyTooLarge, gunzip_limited
from ingest.receivers.log_intake import AcceptedLogs
from ingest.receivers.span_intake import Accepted, Undecodable, retry_after_seconds
from ingest.receivers.status import (
    INVALID_ARGUMENT,
    RESOURCE_EXHAUSTED,
    UNAUTHENTICATED,
    UNAVAILABLE,
)
from store import Closed, Overloaded, WriteFailed

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
# body, where, inflate → Accepted (SpanIntake.export_protobuf / export_json; AcceptedLogs for
# LogIntake's)
ExportFunction = Callable[[bytes, str, Callable[[bytes], bytes] | None], Accepted | AcceptedLogs]


class OtlpExportEndpoint:
    methods = ("POST",)
    exports = True
    otlp = True
    probe = False
    max_body_bytes = None

    def __init__(self, export_protobuf: ExportFunction, export_json: ExportFunction,
                 token: BearerToken, counters: ReceiverCounters, max_body_bytes: int) -> None:
        self.export_protobuf = export_protobuf
        self.export_json = export_json
        self.token = token
        self.counters = counters
        self.max_body_bytes = max_body_bytes

    def admit(self, head: Head) -> Reply | None:
        if not self.token.allows(head.headers.get("Authorization")):
            return status_reply(head, HTTPStatus.UNAUTHORIZED, UNAUTHENTICATED,
                                "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        if head.media_type not in (PROTOBUF, JSON):
            return status_reply(head, HTTPStatus.UNSUPPORTED_MEDIA_TYPE, INVALID_ARGUMENT,
                                f"unsupported Content-Type {head.media_type or '(none)'!r}; "
                                f"send {PROTOBUF} or {JSON}")
        encoding = _encoding(head)
        if encoding not in ("gzip", "identity"):
            return status_reply(head, HTTPStatus.UNSUPPORTED_MEDIA_TYPE, INVALID_ARGUMENT,
                                f"unsupported Content-Encoding {encoding!r}; send gzip or none")
        return None

    def respond(self, request: Request) -> Reply:
        head = request.head
        limit = self.max_body_bytes
        inflate = ((lambda data: gunzip_limited(data, limit))
                   if _encoding(head) == "gzip" else None)
        export = self.export_protobuf if head.media_type == PROTOBUF else self.export_json
        try:
            accepted = export(request.body, "", inflate)
        except BodyTooLarge as error:
            return status_reply(head, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                                str(error))
        except (BadBody, Undecodable) as error:
            return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT, str(error))
        except (Overloaded, Closed, WriteFailed) as error:
            return status_reply(head, HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE, str(error),
                                retry_after=retry_after_seconds(error))
        accepted.record(self.counters, "http", head.peer)
        response = accepted.response()
        if head.answer_type == PROTOBUF:
            return Reply(200, PROTOBUF, response.SerializeToString())
        return Reply(200, JSON, json_format.MessageToJson(response, indent=None).encode())


def _encoding(head: Head) -> str:
    return (head.headers.get("Content-Encoding") or "identity").strip().lower()
