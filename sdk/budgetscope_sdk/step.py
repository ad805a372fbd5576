"""One step of a run: a span with every step attribute budgetscope reads, whose outcome is what
the SDK saw happen in it, not only what escaped the block. Used as `with budget.step(...) as
call:` or `async with`.

What a step records as its outcome, first match wins:
1. `set_outcome(...)`, the agent's own word;
2. an exception that left the block (or was handed over with `set_error`), classified as
   budgetscope classifies it; a generic one gives way to what the SDK saw below;
3. what the SDK saw inside the block even when the agent handled it: a timeout the SDK raised
   (`run`, `run_sync`, `run_process`, `check`, the httpx transports) or `timed_out()` asked
   for; the last response the transports saw: a 5xx, 429 or 408 (upstream_error, with its
   status), a 2xx (ok: answered in time, whatever a service it called saw further down);
4. otherwise no `budget.outcome` at all, so budgetscope decides from the spans below (an HTTP
   client span with a 503 rolls up into this step) or calls it `ok`.
A write's `budget.effect_status` is `completed` only with evidence (a 2xx to a request that was
not a read, or `set_effect_status`), `none` only when nothing was sent, `possible` otherwise."""

from __future__ import annotations

import asyncio
import contextvars
import math
import threading
from collections.abc import Awaitable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from budgetscope_sdk import attributes as attr
from budgetscope_sdk.attributes import (
    EffectStatus,
    ReconcileResult,
    SideEffect,
    StepKind,
    StepOutcome,
)
from budgetscope_sdk.classify import (
    class_of_http_status,
    classify,
    grpc_status_of,
    http_status_of,
    never_sent,
    qualified_type,
)
from budgetscope_sdk.clock import Clock
from budgetscope_sdk.durations import milliseconds
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout
from budgetscope_sdk.ledger import Spend
from budgetscope_sdk.process import run_bounded
from budgetscope_sdk.propagation import (
    IDEMPOTENCY_HEADER,
    deadline_headers,
    grpc_timeout_header,
)
from budgetscope_sdk.results import TimedOut, timed_out
from budgetscope_sdk.retry_after import parse_retry_after
from budgetscope_sdk.usage import Usage

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")

CURRENT_STEP: ContextVar[Step | None] = ContextVar("budgetscope_sdk_step", default=None)

# Methods whose 2xx says nothing about a write having happened (a write step that only read
# its state back has no evidence of its own effect).
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Answers that say the request was not acted on: 429 (rate limited before the work) and 408 (the
# server never received the whole request). Every other failure may have taken effect.
_NOT_ACTED_ON = frozenset({429, 408})


def current_step() -> Step | None:
    """The innermost step open in this context (a thread, or an asyncio task and its callees)."""
    return CURRENT_STEP.get()


@dataclass
class StepRecord:
    """What the agent itself knows about a finished step. `outcome` is the SDK's conclusion;
    `outcome_recorded` whether it was written on the span (False: the SDK saw nothing, and
    budgetscope decides from the spans below)."""

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
    outcome_recorded: bool = True

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


async def _finished_within(task: asyncio.Future[Any], timeout: float) -> bool:
    """Wait for `task` at most `timeout` seconds; whether it finished. What asyncio.wait does
    for one task, without its set bookkeeping (measured: 15 against 22 µs a call); cancelling
    the caller cancels the task."""
    if task.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(timeout, wake)
    try:
        await waiter
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()


class StepBudget(Protocol):
    """What a step needs of the budget it spends from: a RunBudget (or a subagent's
    ChildBudget), written here as an interface so that this module, which budget.py imports,
    does not import budget.py back."""

    @property
    def clock(self) -> Clock: ...

    @property
    def tracer(self) -> Tracer: ...

    @property
    def ended(self) -> bool: ...

    @property
    def deadline_monotonic(self) -> float: ...

    def remaining(self) -> float: ...

    def now_unix_ms(self) -> int: ...

    def context_for_steps(self, parent_step: Step | None) -> Context: ...

    def step_finished(self, step: Step, record: StepRecord, duration: float) -> None: ...


class Step:
    """An admitted call with its slice. `timeout` is the allocation in seconds; `remaining()`
    what is left of it now; `check()` raises StepTimeout once it has passed (for cooperative
    code); `run(awaitable)`, `run_sync(fn)` and `run_process(cmd)` enforce it on asyncio work,
    a function in a thread and a subprocess tree."""

    def __init__(self, budget: StepBudget, kind: StepKind, name: str, *, allocated_s: float,
                 remaining_s: float, cap_s: float | None, side_effect: SideEffect | None,
                 idempotency_key: str | None, attempt: int | None, hedge: bool | None,
                 extra: Mapping[str, Any] | None, links: Sequence[trace.Link] = (),
                 spend: Spend | None = None) -> None:
        self.budget = budget
        self.kind: StepKind = kind
        self.name = name
        self.timeout = allocated_s
        self.remaining_at_start_s = remaining_s
        self.cap_s = cap_s
        self.side_effect: SideEffect | None = side_effect
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self.hedge = hedge
        self.extra = dict(extra or {})
        self.links = tuple(links)
        # Its money and tokens: the hold, the allocation and the usage it records (ledger.py).
        self.spend = spend
        self.effect_status: EffectStatus | None = None
        self.reconcile_result: ReconcileResult | None = None
        self.cleanup_ms: int | None = None
        self.outcome: StepOutcome | None = None
        self.outcome_recorded = False
        self.error: BaseException | None = None
        # Seconds the last response the transports saw asked us to wait (Retry-After).
        self.retry_after_s: float | None = None
        self._explicit_outcome: StepOutcome | None = None
        self._not_sent = False
        self._requests = 0
        # What the SDK itself saw inside the block, handled or not: the class, the HTTP status
        # and the exception that gave it (the last exchange decides, as for spans below).
        self._seen: StepOutcome | None = None
        self._seen_status: int | None = None
        self._seen_error: BaseException | None = None
        self._write_answered = False  # a 2xx to a request that was not a read
        self._settled = False  # a reconcile read that answered
        # False for the span of a call refused at admission: it never got a slice.
        self.admitted = True
        self._returned_error: BaseException | None = None
        self._closed = False
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

    @property
    def max_tokens(self) -> int | None:
        """The output tokens this call may generate: `min(max_output_tokens, what the money
        and tokens left afford)` (budget.allocated_tokens); None when nothing bounds it. Send
        it as the request's `max_tokens` (the httpx transports lower a larger one)."""
        return None if self.spend is None else self.spend.allocated

    @property
    def held_usd(self) -> float:
        """What this call holds against the run's dollar budget while it runs: its estimate
        with the allocated output (0 when it holds nothing)."""
        return 0.0 if self.spend is None else self.spend.hold_nano / 1e9

    @property
    def usage(self) -> Usage | None:
        """The sum of the usage recorded on this step so far (None: none recorded)."""
        return None if self.spend is None else self.spend.usage

    def record_usage(self, *, input_tokens: int | None = None,
                     output_tokens: int | None = None, cache_read: int | None = None,
                     cache_write: int | None = None, reasoning: int | None = None,
                     cost_usd: float | None = None) -> None:
        """Record the tokens one response used (input as OpenTelemetry counts it: cache reads
        and writes included; output with its reasoning) and, without a Price on the step, what
        it cost if you know. Each call adds one response: when the step ends its span carries
        the sums under the OpenTelemetry GenAI names, and budget.cost_usd when the cost is
        known (from the step's Price, else the costs given). The run's ledger counts them, even
        when recorded after the step ended. A value that is not a non-negative integer (a
        finite non-negative number for the cost) is ignored for that field; this never
        raises."""
        if self.spend is None:
            self.spend = Spend(None, self.kind, None)
        self.spend.record(input_tokens, output_tokens, cache_read, cache_write, reasoning,
                          cost_usd)

    def remaining(self) -> float:
        """Seconds left of this step's slice (never negative)."""
        return max(0.0, self._deadline_mono - self.budget.clock.monotonic())

    def expired(self, margin: float = 0.0) -> bool:
        return self.budget.clock.monotonic() >= self._deadline_mono - margin

    def check(self, margin: float = 0.0) -> None:
        """Cooperative cancellation: call at phase boundaries; raises StepTimeout once the slice
        (less `margin`) is spent, and the step records the timeout even if it is caught."""
        if self.expired(margin):
            raise self._timeout(f"{self.key} reached its {self.allocated_ms} ms deadline")

    def headers(self) -> dict[str, str]:
        """Deadline-Epoch-Ms / Deadline-Remaining-Ms for an HTTP call made by this step, and
        its intent's Idempotency-Key when it has one."""
        remaining = self.remaining()
        left = milliseconds(remaining)
        out = deadline_headers(self.budget.now_unix_ms() + left, left)
        if self.idempotency_key is not None:
            out[IDEMPOTENCY_HEADER] = self.idempotency_key
        return out

    def grpc_timeout(self) -> float:
        """The `timeout=` (seconds) for a gRPC stub call made by this step."""
        return self.remaining()

    def grpc_metadata(self) -> list[tuple[str, str]]:
        return [("grpc-timeout", grpc_timeout_header(self.remaining()))]

    # -- what the agent says -----------------------------------------------------------------
    def mark_not_sent(self) -> None:
        """The request provably never left (so a write's effect status is `none`)."""
        self._not_sent = True

    def set_outcome(self, outcome: StepOutcome) -> None:
        """Override the classification, e.g. when a framework returned a timeout as a result
        (checked: an unknown word is a ValueError)."""
        if outcome not in attr.STEP_OUTCOMES:
            raise ValueError(f"unknown step outcome {outcome!r}; one of "
                             f"{sorted(attr.STEP_OUTCOMES)}")
        self._explicit_outcome = outcome

    def set_error(self, error: BaseException) -> None:
        """The call failed with `error` though nothing was raised (a framework or a read-back
        handed it over as a value): the step records and classifies it as if raised."""
        self._returned_error = error

    def set_effect_status(self, status: EffectStatus) -> None:
        if status not in attr.EFFECT_STATUSES:
            raise ValueError(f"unknown effect status {status!r}; one of "
                             f"{sorted(attr.EFFECT_STATUSES)}")
        self.effect_status = status

    def settle(self, result: ReconcileResult) -> None:
        """This reconcile step's read answered with `result`; a definite answer (landed or
        not) is the read's success, whatever the spans below it say."""
        self.reconcile_result = result
        if result != "unknown":
            self._settled = True

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    # -- what the SDK saw (the transports call these; so may a client of your own) ------------
    def record_response(self, status_code: int, *, method: str | None = None,
                        retry_after: str | None = None) -> None:
        """A response arrived for a request this step made; the last one decides. A 5xx, 429
        or 408 makes the step an upstream failure with that status even if the agent handles
        it; a 2xx makes it `ok` (answered in time); a 2xx to a request that is not a read
        (`method` other than GET/HEAD/OPTIONS/TRACE, or not given) is also evidence that a
        write completed. Other statuses (3xx, a 4xx the agent reads) give no class."""
        if self._closed:
            return
        self.retry_after_s = parse_retry_after(retry_after, self.budget.clock.wall_ns() / 1e9)
        if class_of_http_status(status_code) == "upstream_error":
            self._see("upstream_error", None, status_code)
        elif 200 <= status_code < 300:
            # An answer in time: evidence of success for this step, whatever a service it
            # called saw further down (its own steps say so).
            self._see("ok", None, None)
            if method is None or method.upper() not in _SAFE_METHODS:
                self._write_answered = True
        else:
            self._see(None, None, None)  # a redirect or a 4xx the agent reads: no class

    def record_timeout(self, error: BaseException | None = None) -> None:
        """A client-side timeout ended a wait of this step (the SDK's own, or one its transport
        saw): the step is a `client_timeout` and a write's effect `possible`, even if the
        agent handles it."""
        self._see("client_timeout", error, None)

    def record_error(self, error: BaseException) -> None:
        """A request of this step failed below the agent (a refused connection, a reset): its
        class is kept as what the SDK saw; a connection never made, on the step's first
        request, means nothing was sent."""
        if self._requests <= 1 and never_sent(error):
            self._not_sent = True
        found = classify(error)
        if found != "error":
            self._see(found, error, http_status_of(error))

    def request_started(self) -> None:
        """Counted by the transports: once a second request starts, an earlier one failing
        before it was sent no longer proves that nothing was, and a connection failure after
        an earlier request proves nothing either."""
        if self._requests:
            self._not_sent = False
        self._requests += 1

    def _see(self, outcome: StepOutcome | None, error: BaseException | None,
             status: int | None) -> None:
        if self._closed:
            return
        self._seen, self._seen_error, self._seen_status = outcome, error, status

    def _timeout(self, message: str, cleanup_ms: int | None = None) -> StepTimeout:
        error = StepTimeout(message, deadline_ms=self.allocated_ms, cleanup_ms=cleanup_ms)
        self.record_timeout(error)
        return error

    def timed_out(self) -> TimedOut:
        """The honest result of this step having hit its deadline. Asked for inside the block
        (`except StepTimeout: return call.timed_out()`), it also records the step as a
        `client_timeout`."""
        if not self._closed and self._seen != "client_timeout":
            self.record_timeout()
        # `none` only when the request provably never left; after any wait that ended with
        # the request out, `possible`, read or write (a span's effect status is for writes).
        if self.effect_status is not None:
            status: str = self.effect_status
        else:
            status = "none" if self._not_sent or never_sent(self.error) else "possible"
        return timed_out(self.name, self.allocated_ms, side_effect=self.side_effect,
                         side_effect_status=status,
                         idempotency_key=self.idempotency_key, attempt=self.attempt or 1)

    # -- enforcing the slice -----------------------------------------------------------------
    async def run(self, work: Awaitable[T], *, cleanup_grace: float | None = None) -> T:
        """Await `work` within this step's slice. On expiry the work is cancelled and its
        cleanup awaited (at most `cleanup_grace` seconds, default what is left of the run),
        `budget.cleanup_ms` records how long that took, and StepTimeout is raised."""
        task = asyncio.ensure_future(work)
        if await _finished_within(task, self.remaining()):
            return task.result()
        wait_ended = self.budget.clock.monotonic()
        task.cancel()
        grace = self.budget.remaining() if cleanup_grace is None else cleanup_grace
        finished, _ = await asyncio.wait({task}, timeout=max(grace, 0.0))
        self.cleanup_ms = milliseconds(self.budget.clock.monotonic() - wait_ended)
        if task in finished and not task.cancelled():
            task.exception()  # retrieved so asyncio does not log it; the timeout is the news
        if task not in finished:
            self.span.add_event("budget.cleanup_abandoned",
                                {"budget.cleanup_waited_ms": self.cleanup_ms})
        raise self._timeout(f"{self.key} reached its {self.allocated_ms} ms deadline",
                            self.cleanup_ms)

    def run_sync(self, fn: Callable[..., T], *args: Any, cleanup_grace: float = 0.0,
                 **kwargs: Any) -> T:
        """Call `fn(*args, **kwargs)` in a worker thread and wait for it no longer than this
        step's slice. The thread runs in a copy of this context, so `current_step()`, the
        transports and `check()` inside it see this step (its HTTP requests end at the same
        deadline). A thread cannot be cancelled: at the deadline the step stops waiting,
        waits up to `cleanup_grace` seconds for the function to notice (through `check()` or
        its requests failing), records that as `budget.cleanup_ms` or the thread as
        abandoned, and raises StepTimeout. The thread is a daemon: an abandoned one never
        holds the process open."""
        context = contextvars.copy_context()
        finished = threading.Event()
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = context.run(fn, *args, **kwargs)
            except BaseException as error:  # noqa: BLE001 - handed back to the caller's thread
                outcome["error"] = error
            finally:
                finished.set()

        threading.Thread(target=target, name=f"budgetscope {self.key}", daemon=True).start()
        if finished.wait(self.remaining()):
            if "error" in outcome:
                raise outcome["error"]
            return outcome["value"]  # type: ignore[no-any-return]
        wait_ended = self.budget.clock.monotonic()
        message = f"{self.key} reached its {self.allocated_ms} ms deadline"
        if finished.wait(max(cleanup_grace, 0.0)):
            self.cleanup_ms = milliseconds(self.budget.clock.monotonic() - wait_ended)
        else:
            message += "; its thread is still running, abandoned"
            self.span.add_event("budget.cleanup_abandoned", {
                "budget.cleanup_waited_ms":
                    milliseconds(self.budget.clock.monotonic() - wait_ended)})
        raise self._timeout(message, self.cleanup_ms)

    def run_process(self, args: Sequence[str], *, input: bytes | None = None,
                    kill_grace: float = 2.0, **popen: Any) -> subprocess.CompletedProcess[bytes]:
        """Run a command as its own process group and wait no longer than this step's slice;
        at the deadline the whole group gets SIGTERM, then SIGKILL after `kill_grace` seconds
        (a shell's children die with it), `budget.cleanup_ms` records how long that took, and
        StepTimeout is raised (with what the command had written as `.stdout`/`.stderr`)."""
        return run_bounded(self, list(args), input=input, kill_grace=kill_grace, popen=popen)

    # -- span lifecycle --------------------------------------------------------------------
    def _open(self) -> None:
        budget = self.budget
        if budget.ended:
            if self.spend is not None:
                self.spend.release()
            raise BudgetExhausted(f"refused {self.key}: its run has ended", step_key=self.key)
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
            attr.REMAINING_MS: milliseconds(self.remaining_at_start_s),
        }
        # A refused call got no deadline (the deadline this call got), so it has no
        # allocation for budgetscope to measure its utilisation against.
        if self.admitted:
            values[attr.ALLOCATED_MS] = self.allocated_ms
        if self.cap_s is not None:
            values[attr.CAP_MS] = milliseconds(self.cap_s)
        if self.side_effect is not None:
            values[attr.SIDE_EFFECT] = self.side_effect
        if self.idempotency_key is not None:
            values[attr.IDEMPOTENCY_KEY] = self.idempotency_key
        if self.attempt is not None:
            values[attr.ATTEMPT] = self.attempt
        if self.hedge is not None:
            values[attr.HEDGE] = self.hedge
        if self.spend is not None:
            values.update(self.spend.attributes)
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

    def _conclude(self, error: BaseException | None) -> tuple[StepOutcome, bool]:
        """(the step's class, whether the SDK has evidence for it), by the module's rules."""
        if self._explicit_outcome is not None:
            return self._explicit_outcome, True
        if error is not None:
            found = classify(error)
            # A generic error (the agent's own, raised after it handled a 503) gives way to
            # the specific failure the SDK saw, as budgetscope's roll-up would decide.
            if found == "error" and self._seen not in (None, "ok"):
                assert self._seen is not None
                return self._seen, True
            return found, True
        if self._seen is not None:
            return self._seen, True
        if self._settled:
            return "ok", True  # a reconcile read that answered did its job, whatever below
        return "ok", False

    def _effect_for(self, outcome: str, error: BaseException | None) -> EffectStatus | None:
        if self.side_effect != "write":
            return None
        if outcome == "ok":
            explicit_ok = self._explicit_outcome == "ok"
            return "completed" if self._write_answered or explicit_ok else None
        if outcome == "refused" or self._not_sent or never_sent(error):
            return "none"
        status = http_status_of(error) if error is not None else None
        if status is None and outcome == self._seen:
            status = self._seen_status
        if outcome == "upstream_error" and status in _NOT_ACTED_ON:
            return "none"
        return "possible"

    def _close(self, error: BaseException | None) -> None:
        budget = self.budget
        end_ns = budget.clock.wall_ns()
        duration = budget.clock.monotonic() - self._started_mono
        if error is None:
            error = self._returned_error
        self.error = error
        outcome, evidenced = self._conclude(error)
        self.outcome = outcome
        self.outcome_recorded = evidenced
        if self.effect_status is None:
            self.effect_status = self._effect_for(outcome, error)
        if self.cleanup_ms is None and isinstance(error, StepTimeout):
            self.cleanup_ms = error.cleanup_ms
        span = self.span
        closing: dict[str, Any] = {attr.OUTCOME: outcome} if evidenced else {}
        if self.spend is not None:
            self.spend.write_attributes(closing)
        if self.effect_status is not None:
            closing[attr.EFFECT_STATUS] = self.effect_status
        if self.reconcile_result is not None:
            closing[attr.RECONCILE_RESULT] = self.reconcile_result
        if self.cleanup_ms is not None:
            closing[attr.CLEANUP_MS] = self.cleanup_ms
        # The evidence behind the class on the span itself (error.type, the HTTP or gRPC
        # status), so a reader that ignores budget.outcome derives the same class: the error
        # that left the block, else the one the SDK saw and the agent handled.
        handled = self._seen_error if error is None and outcome == self._seen else None
        evidence = error if error is not None else handled
        if evidence is not None:
            closing[attr.ERROR_TYPE] = qualified_type(evidence)
        http_status = http_status_of(error) if error is not None else None
        if http_status is None and outcome == self._seen and self._explicit_outcome is None:
            http_status = self._seen_status
        if http_status is not None:
            closing[attr.HTTP_STATUS] = http_status
        if error is not None:
            grpc_code = grpc_status_of(error)
            if grpc_code is not None:
                closing[attr.GRPC_STATUS] = grpc_code
        if closing:
            span.set_attributes(closing)  # one call: each takes the span's lock
        if evidence is not None:
            span.record_exception(evidence, timestamp=end_ns)
            span.set_status(Status(StatusCode.ERROR,
                                   f"{type(evidence).__name__}: {evidence}"[:500]))
        elif evidenced and outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(end_time=end_ns)
        self._closed = True
        if self.spend is not None:
            self.spend.settle(outcome)  # after the span: usage recorded late is still counted
        if self._step_token is not None:
            CURRENT_STEP.reset(self._step_token)
            self._step_token = None
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)
            self._otel_token = None
        budget.step_finished(self, StepRecord(
            kind=self.kind, name=self.name, start_unix_ns=self._start_ns, end_unix_ns=end_ns,
            outcome=outcome, top_level=self._top_level,
            remaining_ms=milliseconds(self.remaining_at_start_s),
            allocated_ms=self.allocated_ms if self.admitted else None,
            cap_ms=None if self.cap_s is None else milliseconds(self.cap_s),
            side_effect=self.side_effect, effect_status=self.effect_status,
            idempotency_key=self.idempotency_key, attempt=self.attempt,
            reconcile_result=self.reconcile_result, cleanup_ms=self.cleanup_ms,
            outcome_recorded=evidenced), duration)

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
