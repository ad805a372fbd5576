"""One step of a run: a span with every SPEC §2 step attribute, whose outcome is classified from
what the step raised. Used as `with budget.step(...) as call:` or `async with`."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from budgetscope_sdk import attributes as attr
from budgetscope_sdk.classify import (
    classify,
    grpc_status_of,
    http_status_of,
    never_sent,
    qualified_type,
)
from budgetscope_sdk.errors import StepTimeout
from budgetscope_sdk.propagation import deadline_headers, grpc_timeout_header
from budgetscope_sdk.results import TimedOut, timed_out

if TYPE_CHECKING:
    from budgetscope_sdk.budget import RunBudget

T = TypeVar("T")

CURRENT_STEP: ContextVar[Step | None] = ContextVar("budgetscope_sdk_step", default=None)


def current_step() -> Step | None:
    """The innermost step open in this context (a thread, or an asyncio task and its callees)."""
    return CURRENT_STEP.get()


@dataclass
class StepRecord:
    """What the agent itself knows about a finished step: the log tests compare reports with."""

    kind: str
    name: str
    start_unix_ns: int
    end_unix_ns: int
    outcome: str
    top_level: bool
    remaining_ms: int
    allocated_ms: int | None
    cap_ms: int | None
    side_effect: str | None = None
    effect_status: str | None = None
    idempotency_key: str | None = None
    attempt: int | None = None
    reconcile_result: str | None = None
    cleanup_ms: int | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


class Step:
    """An admitted call with its slice. `timeout` is the allocation in seconds; `remaining()`
    what is left of it now; `check()` raises StepTimeout once it has passed (for cooperative
    code); `run(awaitable)` enforces it on asyncio work and measures the cancellation cleanup."""

    def __init__(self, budget: RunBudget, kind: str, name: str, *, allocated_s: float,
                 remaining_s: float, cap_s: float | None, side_effect: str | None,
                 idempotency_key: str | None, attempt: int | None, hedge: bool | None,
                 extra: dict[str, Any] | None, links: Sequence[trace.Link] = ()) -> None:
        self.budget = budget
        self.kind = kind
        self.name = name
        self.timeout = allocated_s
        self.remaining_at_start_s = remaining_s
        self.cap_s = cap_s
        self.side_effect = side_effect
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self.hedge = hedge
        self.extra = dict(extra or {})
        self.links = tuple(links)
        self.effect_status: str | None = None
        self.reconcile_result: str | None = None
        self.cleanup_ms: int | None = None
        self.outcome: str | None = None
        self.error: BaseException | None = None
        self._explicit_outcome: str | None = None
        self._not_sent = False
        # False for the span of a call refused at admission: it never got a slice.
        self.admitted = True
        self._returned_error: BaseException | None = None
        self.span: Span = trace.INVALID_SPAN
        self._started_mono = 0.0
        self._deadline_mono = 0.0
        self._start_ns = 0
        self._top_level = True
        self._otel_token: Any = None
        self._step_token: Token[Step | None] | None = None

    # -- the slice -------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def allocated_ms(self) -> int:
        """The slice in whole milliseconds, rounded down: never more than the call has (1e-6 ms
        absorbs the float error of a slice like 3.0 s computed as 2.9999999…)."""
        return math.floor(self.timeout * 1000 + 1e-6)

    @property
    def deadline_unix_ms(self) -> int:
        return int(self._start_ns // 1_000_000) + self.allocated_ms

    def remaining(self) -> float:
        """Seconds left of this step's slice (never negative)."""
        return max(0.0, self._deadline_mono - self.budget.clock.monotonic())

    def expired(self, margin: float = 0.0) -> bool:
        return self.budget.clock.monotonic() >= self._deadline_mono - margin

    def check(self, margin: float = 0.0) -> None:
        """Cooperative cancellation: call at phase boundaries; raises StepTimeout once the slice
        (less `margin`) is spent."""
        if self.expired(margin):
            raise StepTimeout(f"{self.key} reached its {self.allocated_ms} ms deadline",
                              deadline_ms=self.allocated_ms)

    def headers(self) -> dict[str, str]:
        """Deadline-Epoch-Ms / Deadline-Remaining-Ms for an HTTP call made by this step."""
        remaining = self.remaining()
        return deadline_headers(self.budget.now_unix_ms() + _ms(remaining), _ms(remaining))

    def grpc_timeout(self) -> float:
        """The `timeout=` (seconds) for a gRPC stub call made by this step."""
        return self.remaining()

    def grpc_metadata(self) -> list[tuple[str, str]]:
        return [("grpc-timeout", grpc_timeout_header(self.remaining()))]

    # -- what is known ---------------------------------------------------------------------
    def mark_not_sent(self) -> None:
        """The request provably never left (so a write's effect status is `none`)."""
        self._not_sent = True

    def set_outcome(self, outcome: str) -> None:
        """Override the classification, e.g. when a framework returned a timeout as a result."""
        if outcome not in attr.STEP_OUTCOMES:
            raise ValueError(f"unknown step outcome {outcome!r}; one of "
                             f"{sorted(attr.STEP_OUTCOMES)}")
        self._explicit_outcome = outcome

    def set_error(self, error: BaseException) -> None:
        """The call failed with `error` though nothing was raised (a framework or a read-back
        handed it over as a value): the step records and classifies it as if raised."""
        self._returned_error = error

    def set_effect_status(self, status: str) -> None:
        if status not in attr.EFFECT_STATUSES:
            raise ValueError(f"unknown effect status {status!r}; one of "
                             f"{sorted(attr.EFFECT_STATUSES)}")
        self.effect_status = status

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    def timed_out(self) -> TimedOut:
        """The honest result of this step having hit its deadline."""
        # `none` only when the request provably never left; after any wait that ended with
        # the request out, `possible`, read or write (a span's effect status is for writes).
        if self.effect_status is not None:
            status = self.effect_status
        else:
            status = "none" if self._not_sent or never_sent(self.error) else "possible"
        return timed_out(self.name, self.allocated_ms, side_effect=self.side_effect,
                         side_effect_status=status,
                         idempotency_key=self.idempotency_key, attempt=self.attempt or 1)

    # -- asyncio ---------------------------------------------------------------------------
    async def run(self, work: Awaitable[T], *, cleanup_grace: float | None = None) -> T:
        """Await `work` within this step's slice. On expiry the work is cancelled and its
        cleanup awaited (at most `cleanup_grace` seconds, default what is left of the run),
        `budget.cleanup_ms` records how long that took, and StepTimeout is raised."""
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.remaining())
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        wait_ended = self.budget.clock.monotonic()
        task.cancel()
        grace = self.budget.remaining() if cleanup_grace is None else cleanup_grace
        finished, _ = await asyncio.wait({task}, timeout=max(grace, 0.0))
        self.cleanup_ms = _ms(self.budget.clock.monotonic() - wait_ended)
        if task in finished and not task.cancelled():
            task.exception()  # retrieved so asyncio does not log it; the timeout is the news
        if task not in finished:
            self.span.add_event("budget.cleanup_abandoned",
                                {"budget.cleanup_waited_ms": self.cleanup_ms})
        raise StepTimeout(f"{self.key} reached its {self.allocated_ms} ms deadline",
                          deadline_ms=self.allocated_ms, cleanup_ms=self.cleanup_ms)

    # -- span lifecycle --------------------------------------------------------------------
    def _open(self) -> None:
        budget = self.budget
        clock = budget.clock
        self._started_mono = clock.monotonic()
        # A step entered some time after it was admitted still ends by the run's deadline.
        self._deadline_mono = min(self._started_mono + self.timeout,
                                  budget.deadline_monotonic)
        self._start_ns = clock.wall_ns()
        parent_step = CURRENT_STEP.get()
        self._top_level = parent_step is None or parent_step.budget is not budget
        parent_context = budget.context_for_steps(parent_step)
        self.span = budget.tracer.start_span(f"{self.kind} {self.name}", context=parent_context,
                                             start_time=self._start_ns,
                                             attributes=self._start_attributes(),
                                             links=self.links or None)
        self._otel_token = otel_context.attach(trace.set_span_in_context(self.span,
                                                                          parent_context))
        self._step_token = CURRENT_STEP.set(self)

    def _start_attributes(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            attr.STEP_KIND: self.kind, attr.STEP_NAME: self.name,
            attr.REMAINING_MS: _ms(self.remaining_at_start_s),
        }
        # A refused call got no deadline (SPEC §2: the deadline this call got), so it has no
        # allocation for budgetscope to measure its utilisation against.
        if self.admitted:
            values[attr.ALLOCATED_MS] = self.allocated_ms
        if self.cap_s is not None:
            values[attr.CAP_MS] = _ms(self.cap_s)
        if self.side_effect is not None:
            values[attr.SIDE_EFFECT] = self.side_effect
        if self.idempotency_key is not None:
            values[attr.IDEMPOTENCY_KEY] = self.idempotency_key
        if self.attempt is not None:
            values[attr.ATTEMPT] = self.attempt
        if self.hedge is not None:
            values[attr.HEDGE] = self.hedge
        if self.kind == "tool":
            values[attr.GEN_AI_OPERATION] = "execute_tool"
            values[attr.GEN_AI_TOOL_NAME] = self.name
        elif self.kind == "model":
            values[attr.GEN_AI_OPERATION] = "chat"
            values[attr.GEN_AI_REQUEST_MODEL] = self.name
        elif self.kind == "subagent":
            values[attr.GEN_AI_OPERATION] = "invoke_agent"
            values[attr.GEN_AI_AGENT_NAME] = self.name
        values.update(self.extra)
        return values

    def _effect_for(self, outcome: str, error: BaseException | None) -> str | None:
        if self.side_effect != "write":
            return None
        if outcome in ("ok",):
            return "completed"
        if outcome == "refused" or self._not_sent or never_sent(error):
            return "none"
        return "possible"

    def _close(self, error: BaseException | None) -> None:
        budget = self.budget
        end_ns = budget.clock.wall_ns()
        duration = budget.clock.monotonic() - self._started_mono
        if error is None:
            error = self._returned_error
        self.error = error
        outcome = self._explicit_outcome or classify(error)
        self.outcome = outcome
        if self.effect_status is None:
            self.effect_status = self._effect_for(outcome, error)
        if self.cleanup_ms is None and isinstance(error, StepTimeout):
            self.cleanup_ms = error.cleanup_ms
        span = self.span
        closing: dict[str, Any] = {attr.OUTCOME: outcome}
        if self.effect_status is not None:
            closing[attr.EFFECT_STATUS] = self.effect_status
        if self.reconcile_result is not None:
            closing[attr.RECONCILE_RESULT] = self.reconcile_result
        if self.cleanup_ms is not None:
            closing[attr.CLEANUP_MS] = self.cleanup_ms
        if error is not None:
            closing[attr.ERROR_TYPE] = qualified_type(error)
            # The status the error carried, as the span's own evidence (SPEC §3 rules 2-3), so
            # the class follows from the span even for a reader that ignores budget.outcome.
            http_status = http_status_of(error)
            if http_status is not None:
                closing[attr.HTTP_STATUS] = http_status
            grpc_code = grpc_status_of(error)
            if grpc_code is not None:
                closing[attr.GRPC_STATUS] = grpc_code
        span.set_attributes(closing)  # one call: each takes the span's lock
        if error is not None:
            span.record_exception(error, timestamp=end_ns)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        elif outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(end_time=end_ns)
        if self._step_token is not None:
            CURRENT_STEP.reset(self._step_token)
            self._step_token = None
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)
            self._otel_token = None
        budget.step_finished(self, StepRecord(
            kind=self.kind, name=self.name, start_unix_ns=self._start_ns, end_unix_ns=end_ns,
            outcome=outcome, top_level=self._top_level,
            remaining_ms=_ms(self.remaining_at_start_s),
            allocated_ms=self.allocated_ms if self.admitted else None,
            cap_ms=None if self.cap_s is None else _ms(self.cap_s),
            side_effect=self.side_effect, effect_status=self.effect_status,
            idempotency_key=self.idempotency_key, attempt=self.attempt,
            reconcile_result=self.reconcile_result, cleanup_ms=self.cleanup_ms), duration)

    def __enter__(self) -> Step:
        self._open()
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._close(error)

    async def __aenter__(self) -> Step:
        self._open()
        return self

    async def __aexit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._close(error)
