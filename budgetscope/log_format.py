"""Log lines of `budgetscope serve`: text for people (default) or one JSON object per line for
a log pipeline (`--log-format json`), on standard error.

A JSON line always has `ts` (UTC, ISO 8601), `level`, `logger`, `event` (a stable name such as
`start`, `request_rejected`, `retention`, `stop`) and `message`, plus the fields the event
carries (passed as `extra=` by whoever logs it). Secrets never go into a record: start-up logs
whether a token is required, not the token.

Log lines echo span data (a rejected span's name, a peer's detail) and often end up on a
terminal: a text line goes through `queries.terminal.terminal_safe`; a JSON line escapes
the controls JSON itself would leave raw (DEL, C1, bidi overrides) as `\\uXXXX`, so it stays
the same value for a log pipeline and is inert on a screen.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

from ingest.receivers.log_pace import PacedLogs
from queries.terminal import json_inert, terminal_safe

# Loggers of this product; Streamlit's and grpc's keep their own handlers.
PRODUCT_LOGGERS = ("budgetscope", "ingest", "queries", "dashboard")
# Loggers a client can make speak, one line per request at worst: a malformed request, an
# accept() that fails for lack of descriptors (asyncio's at EMFILE, the dashboard's own accept
# loop), an error in a handler, a malformed websocket message. Each gets one filter that lets
# one line of a kind through per period, with how many it stands for
# (ingest/receivers/log_pace.py); the receivers pace their own rejection lines and the
# OTLP/HTTP port's accept loop its own, the same way.
CLIENT_LOGGERS = ("asyncio", "tornado.access", "tornado.application", "tornado.general",
                  "uvicorn.error", "uvicorn.access", "dashboard.server.connections",
                  "grpc._cython.cygrpc", "grpc._server", "grpc.aio._server",
                  # a signed-in browser's websocket messages (a malformed one is a traceback)
                  "streamlit.web.server.starlette.starlette_websocket",
                  "streamlit.web.server.starlette.starlette_routes",
                  "streamlit.runtime.app_session")
# Attributes every LogRecord has: whatever else a record carries came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json_inert(json.dumps(line, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record), keep_newlines=True)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pace_client_logs(paced: PacedLogs | None = None) -> PacedLogs:
    """Put one pace (`paced`, else a new one) on every logger of CLIENT_LOGGERS that has none;
    the pace those loggers now share."""
    shared = paced
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        own = next((f for f in logger.filters if isinstance(f, PacedLogs)), None)
        if own is not None:
            shared = shared or own
            continue
        shared = shared or PacedLogs()
        logger.addFilter(shared)
    assert shared is not None
    return shared


def configure_logging(log_format: str, stream: Any = None) -> logging.Handler:
    """Send the product's log records at INFO and above to `stream` (stderr) in `log_format`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    for name in PRODUCT_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return handler
