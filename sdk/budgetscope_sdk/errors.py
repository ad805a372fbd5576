"""The SDK's own exceptions: each one says which side gave up."""

from __future__ import annotations


class BudgetExhausted(Exception):
    """A call was refused before it started: the budget left (minus the landing reserve) is
    below the call's minimum, the ladder no longer admits it, or its run has already ended.
    Nothing was sent. `refused_by` says which budget refused it: `time`, `usd` or `tokens`."""

    def __init__(self, message: str, *, step_key: str = "", available_ms: int = 0,
                 minimum_ms: int = 0, refused_by: str = "time") -> None:
        super().__init__(message)
        self.step_key = step_key
        self.available_ms = available_ms
        self.minimum_ms = minimum_ms
        self.refused_by = refused_by


class StepTimeout(TimeoutError):
    """Our own deadline for a step fired (the client gave up; the other side may still be
    working). A TimeoutError, so code that already catches timeouts keeps working; the httpx
    transports raise it as httpx's timeout of the same phase too.

    `deadline_ms` is the slice that ran out; `cleanup_ms` how long the cancelled work took to
    stop after the wait ended, when that was measured."""

    def __init__(self, message: str = "", *, deadline_ms: int = 0,
                 cleanup_ms: int | None = None) -> None:
        # Keyword arguments with defaults: a class that also derives from another library's
        # timeout (httpx's) has its base call this with the message alone.
        super().__init__(message)
        self.deadline_ms = deadline_ms
        self.cleanup_ms = cleanup_ms
