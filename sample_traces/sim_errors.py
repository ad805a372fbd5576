"""The exceptions a simulated call ends with, handed to budgetscope_sdk as a real agent's step
would hand it what the client raised: the SDK records the error's type, the HTTP or gRPC status
it carries, the exception event and the span status from it."""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from .latency import Failure


class _GrpcCode:
    """What grpc.StatusCode members look like to the SDK: `.value == (int, name)`."""

    def __init__(self, code: int, name: str) -> None:
        self.value = (code, name)
        self.name = name


@cache
def error_class(dotted: str) -> type[Exception]:
    """An exception class whose qualified name is `dotted` (`httpx.ReadTimeout`, or a bare
    `RateLimitError`), standing in for the client library's own."""
    module, _, name = dotted.rpartition(".")
    cls: type[Exception] = type(name, (Exception,), {})
    cls.__module__ = module or "builtins"
    cls.__qualname__ = name
    return cls


def failure_error(failure: Failure, error_type: str, grpc_names: dict[int, str]) -> Exception:
    error: Any = error_class(error_type)(failure.message)
    if failure.http_status is not None:
        error.status_code = failure.http_status
    elif failure.grpc_code is not None:
        code = _GrpcCode(failure.grpc_code, grpc_names[failure.grpc_code])
        error.code = lambda: code
    return error


def timeout_error(kind: str, name: str, allocated_ms: int) -> Exception:
    """What the agent's code sees when the slice ran out: the OpenAI client's APITimeoutError
    for a model call (its `timeout=` was the slice), asyncio's TimeoutError for a tool awaited
    with `asyncio.wait_for(..., call.timeout)`."""
    cls = error_class("APITimeoutError") if kind == "model" else TimeoutError
    return cls(f"{name}: deadline of {allocated_ms} ms")


def cancelled_error(by_user: bool) -> asyncio.CancelledError:
    return asyncio.CancelledError("cancelled by user" if by_user else "the other request won")
