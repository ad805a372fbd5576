"""Which class a failed step gets, from what it raised (budgetscope's docs/metrics.md §3), so
that the outcome the SDK writes is the one budgetscope would derive from the same evidence.

Order: the SDK's own exceptions and asyncio cancellation first (we know who gave up), then an
HTTP or gRPC status the exception carries, then the type name and message normalised as §3
rule 4 reads them."""

from __future__ import annotations

import asyncio
import re

from budgetscope_sdk.attributes import StepOutcome
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout

_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_CODE = re.compile(r"(?:code|status)(\d{3})")

_UPSTREAM_WORDS = ("connection", "unavailable", "refused", "reset", "ratelimit",
                   "toomanyrequests", "internalserver", "overloaded", "badgateway")
_CLIENT_WORDS = ("notfound", "badrequest", "authentication", "permissiondenied", "unprocessable")
_GRPC_UPSTREAM = {14, 13, 2, 8, 10, 15}
_GRPC_CLIENT = {3, 5, 6, 7, 9, 11, 12, 16}
_GRPC_NAMES = {"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3,
               "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6,
               "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
               "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13,
               "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16}


def qualified_type(error: BaseException) -> str:
    kind = type(error)
    module = kind.__module__
    if module in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{module}.{kind.__qualname__}"


def normalise(text: str) -> str:
    return _NOT_ALNUM.sub("", text.lower())


def class_of_text(text: str) -> StepOutcome | None:
    """docs/metrics.md §3, rule 4, on one text; None when it gives no specific class."""
    norm = normalise(text)
    if not norm:
        return None
    if norm.isdigit():
        code: int | None = int(norm)
    else:
        found = _CODE.search(norm)
        code = int(found.group(1)) if found else None
    if "gatewaytimeout" in norm:
        return "upstream_error"
    if "timeout" in norm or "timedout" in norm or "deadline" in norm:
        return "client_timeout"
    if "cancel" in norm:
        return "cancelled"
    if (code is not None and (500 <= code <= 599 or code == 429)) or any(
            word in norm for word in _UPSTREAM_WORDS):
        return "upstream_error"
    if (code is not None and 400 <= code <= 499) or any(word in norm for word in _CLIENT_WORDS):
        return "client_error"
    return None


def class_of_http_status(status: int) -> StepOutcome | None:
    if status >= 500 or status in (429, 408):
        return "upstream_error"
    if 400 <= status <= 499:
        return "client_error"
    return None


def class_of_grpc_status(code: int) -> StepOutcome | None:
    if code == 4:
        return "client_timeout"
    if code == 1:
        return "cancelled"
    if code in _GRPC_UPSTREAM:
        return "upstream_error"
    if code in _GRPC_CLIENT:
        return "client_error"
    return None


def http_status_of(error: BaseException) -> int | None:
    """The HTTP status an exception carries: httpx.HTTPStatusError (.response.status_code),
    the OpenAI client's APIStatusError (.status_code), requests' HTTPError (.response)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def grpc_status_of(error: BaseException) -> int | None:
    code_method = getattr(error, "code", None)
    if not callable(code_method):
        return None
    try:
        code = code_method()
    except Exception:  # noqa: BLE001 - a foreign .code() that is not gRPC's
        return None
    value = getattr(code, "value", None)
    if isinstance(value, tuple) and value and isinstance(value[0], int):
        return value[0]  # grpc.StatusCode members are (int, name)
    name = getattr(code, "name", None)
    return _GRPC_NAMES.get(name) if isinstance(name, str) else None


def classify(error: BaseException | None) -> StepOutcome:
    """The step outcome for what a step raised (None: it returned normally)."""
    if error is None:
        return "ok"
    if isinstance(error, BudgetExhausted):
        return "refused"
    if isinstance(error, StepTimeout):
        return "client_timeout"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    status = http_status_of(error)
    if status is not None:
        from_status = class_of_http_status(status)
        if from_status is not None:
            return from_status
    grpc_code = grpc_status_of(error)
    if grpc_code is not None:
        from_grpc = class_of_grpc_status(grpc_code)
        if from_grpc is not None:
            return from_grpc
    for text in (qualified_type(error), str(error)):
        found = class_of_text(text)
        if found is not None:
            return found
    return "error"


def never_sent(error: BaseException | None) -> bool:
    """True only when the request provably never left: we refused it, or the connection was
    never established (connect refused / failed). Anything else may have reached the server."""
    if error is None:
        return False
    if isinstance(error, (BudgetExhausted, ConnectionRefusedError)):
        return True
    # httpx.ConnectError / ConnectTimeout (and the transports' deadline form of the latter, a
    # subclass) and the OpenAI client's APIConnectionError wrapping one are raised before a
    # byte of the request is written.
    if _named(error, _NOT_SENT):
        return True
    cause = error.__cause__
    return cause is not None and cause is not error and (
        isinstance(cause, ConnectionRefusedError) or _named(cause, _NOT_SENT))


_NOT_SENT = frozenset({"ConnectError", "ConnectTimeout"})


def _named(error: BaseException, names: frozenset[str]) -> bool:
    return any(kind.__name__ in names for kind in type(error).__mro__)
