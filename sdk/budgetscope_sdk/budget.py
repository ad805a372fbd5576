"""RunBudget: one deadline per run, minted where the run starts, that every step spends from.

A RunBudget opened while another is open in the same context is not a second run: it is a
`subagent` step of the enclosing run whose deadline is clamped to what that run may still spend
(the articles' "subagents inherit a slice, never a fresh allocation"), unless it is asked for
as a separate run (`separate_run=True`: a new trace, linked to where it started, with a
deadline of its own). `RunBudget.from_remote(headers, ...)` continues a caller's deadline in a
service.

The run keeps its time (the deadline, the reserve, the clock), its span and its settings, and
tells the story of a run; three collaborators it holds do the rest: its Admission
(admission.py: what a step may take, the ladder, refusals by time, money and tokens), its
Nesting (nesting.py: parent runs, the clamping of a nested budget, the context's current
budget) and its Ending (ending.py: the outcome, the closing attributes of the run span)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Tracer

from budgetscope_sdk import attributes as attr
from budgetscope_sdk import intents, ladder, links
from budgetscope_sdk.admission import Admission
from budgetscope_sdk.attributes import RunOutcome, SideEffect, StepKind
from budgetscope_sdk.clock import SYSTEM_CLOCK, Clock, asleep_on, sleep_on

# Duration and seconds live in durations.py (below this module); still importable from here.
from budgetscope_sdk.durations import Duration as Duration
from budgetscope_sdk.durations import milliseconds
from budgetscope_sdk.durations import seconds as seconds

# RunResult lives with the ending that makes it (ending.py); still importable from here.
from budgetscope_sdk.ending import Ending
from budgetscope_sdk.ending import RunResult as RunResult
from budgetscope_sdk.errors import StepTimeout
from budgetscope_sdk.intents import Intent
from budgetscope_sdk.ledger import DEFAULT_MINIMUM_OUTPUT_TOKENS, Ledger
from budgetscope_sdk.nesting import CURRENT_BUDGET, INHERITABLE, Nesting, child_allocation
from budgetscope_sdk.price import Price
from budgetscope_sdk.propagation import RemoteDeadline, deadline_headers, grpc_timeout_header
from budgetscope_sdk.retry_budget import RetryBudget
from budgetscope_sdk.step import Step, StepRecord

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")

_VERSION = "0.1.0"


def current_budget() -> RunBudget | None:
    """The innermost RunBudget open in this context."""
    found = CURRENT_BUDGET.get()
    return found if isinstance(found, RunBudget) else None


class RetryOptions(TypedDict, total=False):
    """The options of RunBudget.retry / aretry (see intents.retry)."""

    kind: StepKind
    name: str | None
    side_effect: SideEffect
    attempts: int
    backoff: float
    factor: float
    max_backoff: float | None
    jitter: bool
    retry_on: Iterable[str]
    cap: Duration | None
    minimum: Duration
    idempotent: bool
    retry_budget: RetryBudget | None


class RunBudget:
    """One wall-clock budget for a run, and optionally a dollar and a token budget.

        with RunBudget(30, reserve=3, usd=0.50, tokens=200_000) as budget:
            with budget.step("tool", "fetch_report", cap=9) as call:
                fetch(timeout=call.timeout, headers=call.headers())

    `total` and every other duration are seconds (or timedeltas), finite, `total` above 0. The
    run span (opened here, or the current span when `decorate_current=True`) gets
    budget.total_ms, budget.deadline_unix_ms and budget.reserve_ms, and budget.run.outcome on
    exit. Durations are read from the monotonic clock; the wall clock gives only the absolute
    deadline and the timestamps.

    Entered while another RunBudget is open in the same context, it is that run's `subagent`
    step (named `agent`, else `name`), clamped to what the run may still spend, and
    `decorate_current` does not apply; `separate_run=True` makes it a run of its own instead, the
    root of a new trace linked to the span it was started in. `retry_budget` is a RetryBudget
    shared by the process that this run's retries draw from. `usd` and `tokens` are the run's
    dollar and token budgets (budget.total_usd, budget.total_tokens; see ledger.py), of which
    `reserve_usd` only landing steps may spend."""

    def __init__(self, total: Duration, *, reserve: Duration | None = None,
                 per_step_caps: Mapping[str, Duration] | None = None,
                 name: str = "agent run", agent: str | None = None,
                 tracer: Tracer | None = None, clock: Clock | None = None,
                 decorate_current: bool = False,
                 latencies: ladder.LatencyBook | None = None,
                 attributes: Mapping[str, Any] | None = None,
                 intent_namespace: str | None = None,
                 arrived_unix_ns: int | None = None,
                 separate_run: bool = False,
                 retry_budget: RetryBudget | None = None, usd: float | None = None,
                 tokens: int | None = None, reserve_usd: float = 0) -> None:
        self.total_s = seconds(total, "total")
        if self.total_s <= 0:
            raise ValueError("a run budget must be more than 0 seconds")
        # The articles' rule of thumb is max(20 s, 10%); 10% alone keeps short budgets usable.
        self.reserve_s = 0.1 * self.total_s if reserve is None else seconds(reserve, "reserve")
        if self.reserve_s >= self.total_s:
            raise ValueError(f"the reserve ({self.reserve_s} s) must be less than the budget "
                             f"({self.total_s} s)")
        self.per_step_caps = {key: seconds(value, f"cap of {key}")
                              for key, value in (per_step_caps or {}).items()}
        self.ledger = Ledger.for_run(usd, tokens, reserve_usd)
        self.name = name
        self.agent = agent
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._tracer = tracer
        self.decorate_current = decorate_current
        self.separate_run = separate_run
        self.latencies = latencies or ladder.DEFAULT_LATENCIES
        self.retry_budget = retry_budget
        self._extra = dict(attributes or {})
        self.intent_namespace = intent_namespace or secrets.token_hex(6)
        self._intents: dict[tuple[str, tuple[str, ...]], Intent] = {}
        self.span: Span = trace.INVALID_SPAN
        self._owns_span = False
        self._started = False
        self._ended = False
        self._start_mono = 0.0
        self._start_ns = 0
        # When the caller's clock started (the request's arrival), if before the run: the
        # deadline counts from it, so time spent queueing is already spent.
        self._arrived_unix_ns = arrived_unix_ns
        self._spent_before_s = 0.0
        self._origin_ns = 0  # where the budget's clock started: the arrival, else the start
        self._end_ns: int | None = None
        self._span_context: Context | None = None
        # A service's budget from its caller's deadline (from_remote): the deadline it was
        # given (whether its span continues the caller's run is the nesting's to say).
        self.remote: RemoteDeadline | None = None
        given = {"clock": clock, "latencies": latencies, "intent_namespace": intent_namespace,
                 "retry_budget": retry_budget}
        self._admission = Admission(self, self._require_started)
        # What was left to defaults, so a budget nested in a run takes the enclosing one's.
        self._nesting = Nesting(frozenset(setting for setting in INHERITABLE
                                           if given[setting] is None))
        self._ending = Ending(self)

    @classmethod
    def from_remote(cls, headers: Mapping[str, str], *, default: Duration,
                    maximum: Duration | None = None, reserve: Duration | None = None,
                    as_run: bool | None = None, clock: Clock | None = None,
                    **options: Any) -> RunBudget:
        """A service's budget for one request: the caller's deadline (Deadline-Remaining-Ms,
        else Deadline-Epoch-Ms), so what the service calls next spends the caller's time.
        Never raises on what the caller sent: a missing, malformed, negative, infinite or
        oversized value gives `default` (or `maximum`) and `budget.remote.problem` says why.
        A caller whose deadline has already passed gets a budget that refuses every step.

        When the request is part of a trace (a span is current: the server span your
        instrumentation opened from the caller's traceparent), the budget's span continues
        the caller's run instead of starting another (it carries no budget.total_ms), and its
        steps are steps of the caller's run; otherwise, or with `as_run=True`, it is a run.
        A `reserve` that does not fit what the caller left becomes 10% of it."""
        chosen = clock or SYSTEM_CLOCK
        remote = RemoteDeadline.from_headers(
            headers, chosen, seconds(default, "default"),
            max_s=None if maximum is None else seconds(maximum, "maximum"))
        assert remote is not None  # a default was given
        left = remote.remaining()
        wanted = None if reserve is None else seconds(reserve, "reserve")
        if wanted is not None and wanted >= left:
            wanted = None
        budget = cls(left if left > 0 else 1.0, reserve=wanted, clock=clock,
                     arrived_unix_ns=chosen.wall_ns(), **options)
        if left <= 0:
            # The caller's deadline passed before we started: nothing may be spent.
            budget.total_s, budget.reserve_s = 0.0, 0.0
        budget.remote = remote
        in_trace = trace.get_current_span().get_span_context().is_valid
        budget._nesting.continues_caller = (not as_run) if as_run is not None else in_trace
        return budget

    # -- time ------------------------------------------------------------------------------
    @property
    def tracer(self) -> Tracer:
        if self._tracer is None:
            # Left to the default: the tracer of the run this budget nests in, else the SDK's.
            parent = self._nesting.parent
            self._tracer = parent.tracer if parent is not None else trace.get_tracer(
                "budgetscope_sdk", _VERSION)
        return self._tracer

    @property
    def deadline_unix_ms(self) -> int:
        self._require_started()
        return self._origin_ns // 1_000_000 + milliseconds(self.total_s)

    def elapsed(self) -> float:
        self._require_started()
        return self.clock.monotonic() - self._start_mono + self._spent_before_s

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.total_s - self.elapsed())

    def spendable(self) -> float:
        """Seconds left that ordinary work may spend: the remaining budget minus the reserve."""
        return max(0.0, self.remaining() - self.reserve_s)

    @property
    def started_unix_ns(self) -> int:
        self._require_started()
        return self._start_ns

    @property
    def ended_unix_ns(self) -> int | None:
        """When the run span ended (None while the run is open)."""
        return self._end_ns

    @property
    def trace_id(self) -> str:
        """The run's trace id, 32 lowercase hex (budgetscope's run_id when the run is the
        trace's root)."""
        return format(self.span.get_span_context().trace_id, "032x")

    def url(self, dashboard: str | None = None) -> str | None:
        """This run's view on the budgetscope dashboard, for a log line: `dashboard`, else the
        address set with links.set_dashboard_url or BUDGETSCOPE_DASHBOARD_URL; None without one
        (links.py). A budget nested in a run (a subagent step) links to its trace's run."""
        return links.run_url(self.span, dashboard, nested=self.as_step is not None)

    def now_unix_ms(self) -> int:
        return self.clock.wall_ns() // 1_000_000

    def expired(self) -> bool:
        return self.elapsed() >= self.total_s

    # -- the ladder ------------------------------------------------------------------------
    @property
    def phase(self) -> str:
        """open, narrowing (≥60% spent), fit_only (≥80%) or landing (only the reserve left).
        Reading it records any phase change as an event on the run span."""
        return self._admission.observe()

    def may_widen(self) -> bool:
        """Whether new parallel branches, subagents or speculative calls may still start."""
        return self.phase == ladder.OPEN

    def describe(self) -> str:
        """What is left, in words the model can read: the time (and money and tokens when the
        run has those budgets) and the phase of the ladder."""
        return self.ledger.describe(self.remaining(), self.total_s, self.reserve_s, self.phase)

    # -- allocation (admission.py) ---------------------------------------------------------
    def cap_for(self, kind: str, name: str) -> float | None:
        return self._admission.cap_for(kind, name)

    def slice(self, cap: Duration | None = None, minimum: Duration = 0.0, *,
              kind: StepKind = "other", name: str = "slice", landing: bool = False,
              widening: bool = False) -> float:
        """Seconds this call may take: min(cap, remaining − reserve). Raises BudgetExhausted,
        and records a `refused` step span, when that is below `minimum` or the ladder no longer
        admits the call (`widening` calls stop at 60%; from 80% a call whose recorded p95
        does not fit is refused). `landing=True` may spend the reserve."""
        allocated, _, _ = self._admission.admit(kind, name, cap, minimum, landing, widening, {})
        return allocated

    # -- steps -----------------------------------------------------------------------------
    def step(self, kind: StepKind, name: str, *, side_effect: SideEffect | None = None,
             idempotency_key: str | None = None, cap: Duration | None = None,
             minimum: Duration = 0.0, attempt: int | None = None, hedge: bool | None = None,
             landing: bool = False, widening: bool = False,
             attributes: Mapping[str, Any] | None = None,
             links: Sequence[trace.Link] = (), max_output_tokens: int | None = None,
             price: Price | None = None, estimate_usd: float | None = None,
             input_tokens: int | None = None,
             minimum_output_tokens: int = DEFAULT_MINIMUM_OUTPUT_TOKENS) -> Step:
        """Admit a call and give it its slice; use the result with `with` or `async with`.
        Refusal (BudgetExhausted) happens here, before anything starts. `links` point the
        step's span at related spans (a reconcile read at the write it settles). A model
        call's output is allocated from the money and tokens left (`call.max_tokens`), held
        while it runs, or refused (ledger.Ledger.admit)."""
        return self._admission.step(
            kind, name, side_effect=side_effect, idempotency_key=idempotency_key, cap=cap,
            minimum=minimum, attempt=attempt, hedge=hedge, landing=landing, widening=widening,
            attributes=attributes, links=links, max_output_tokens=max_output_tokens,
            price=price, estimate_usd=estimate_usd, input_tokens=input_tokens,
            minimum_output_tokens=minimum_output_tokens)

    def step_finished(self, step: Step, record: StepRecord, duration: float) -> None:
        self._ending.note(record)
        if record.outcome != "refused" and record.outcome != "cancelled":
            # A timed-out call's duration is a lower bound of its latency, kept so the fit_only
            # rung errs towards refusing; a cancelled one (a lost hedge) says nothing.
            self.latencies.record(record.key, duration)

    @property
    def deadline_monotonic(self) -> float:
        self._require_started()
        return self._start_mono + self.total_s - self._spent_before_s

    def context_for_steps(self, parent_step: Step | None) -> Context:
        """Steps open under the innermost step of this budget, else under the run span."""
        if parent_step is not None and parent_step.budget is self:
            return trace.set_span_in_context(parent_step.span)
        assert self._span_context is not None
        return self._span_context

    # -- children (nesting.py) -------------------------------------------------------------
    def child(self, share: float | None = None, duration: Duration | None = None, *,
              name: str = "subagent", reserve: Duration | None = None,
              minimum: Duration = 0.0, kind: StepKind = "subagent",
              side_effect: SideEffect | None = None) -> RunBudget:
        """A subagent's budget, carved from this one: `share` of what may be spent now, or
        `duration` seconds, never past this run's spendable time (so the child's deadline is
        no later than ours, and our reserve stays ours). Its `with` opens a `subagent` step;
        refused like any call when nothing is left. `kind="tool"` makes the slice a tool step
        whose own attempts (an HTTP client retrying inside it) spend from it."""
        wanted = child_allocation(self.spendable, share, duration)
        step = self.step(kind, name, cap=wanted, minimum=minimum, side_effect=side_effect)
        return ChildBudget(step, reserve=0.0 if reserve is None else reserve,
                           per_step_caps=self.per_step_caps, name=name,
                           agent=name if kind == "subagent" else None,
                           tracer=self.tracer, clock=self.clock, latencies=self.latencies,
                           intent_namespace=self.intent_namespace,
                           retry_budget=self.retry_budget)

    @property
    def as_step(self) -> Step | None:
        """A subagent's budget (ChildBudget, or a RunBudget nested in a run) is a step of the
        enclosing run: this is that step, and the budget's span is its span."""
        return self._nesting.as_step

    # -- intents, retries, reconciliation (see intents.py) ----------------------------------
    def intent(self, operation: str, *parts: object) -> Intent:
        """The one idempotency key for this logical operation in this run, reused by every
        attempt (asking again for the same operation and parts returns the same intent)."""
        key = (operation, tuple(str(part) for part in parts))
        found = self._intents.get(key)
        if found is None:
            found = self._intents[key] = Intent(self, operation, key[1])
        return found

    def retry(self, intent: Intent, call: Callable[[Step], T], *,
              reconcile: Callable[[Step], T | None] | None = None,
              **options: Unpack[RetryOptions]) -> T:
        """Run `call(step)` as numbered attempts of `intent` (same idempotency key each time),
        retrying the classes in `retry_on` (client_timeout, upstream_error) up to `attempts`,
        after a full-jitter backoff or the Retry-After the other side sent, each wait recorded
        as a `backoff` step. A retry whose wait and minimum no longer fit, or that the retry
        budget does not allow, is declined and the last error raised. A write whose effect is
        `possible` is read back with `reconcile` first (landed: its value is returned; not
        landed: re-sent with the same key; unknown: not re-sent), and without `reconcile` is
        not re-sent unless `idempotent=True` says the server deduplicates by key. See
        intents.retry for every option."""
        return intents.retry(self, intent, call, reconcile=reconcile, **options)

    async def aretry(self, intent: Intent, call: Callable[[Step], Awaitable[T]], *,
                     reconcile: Callable[[Step], Awaitable[T | None]] | None = None,
                     **options: Unpack[RetryOptions]) -> T:
        """The asyncio form of `retry`."""
        return await intents.aretry(self, intent, call, reconcile=reconcile, **options)

    # -- propagation -----------------------------------------------------------------------
    def headers(self) -> dict[str, str]:
        return deadline_headers(self.deadline_unix_ms, milliseconds(self.remaining()))

    def grpc_timeout(self) -> float:
        return self.remaining()

    def grpc_metadata(self) -> list[tuple[str, str]]:
        return [("grpc-timeout", grpc_timeout_header(self.remaining()))]

    # -- results (ending.py) ---------------------------------------------------------------
    @property
    def records(self) -> list[StepRecord]:
        """What the run knows of each of its finished steps, in the order they finished."""
        return self._ending.records

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run ended (budget.run.outcome); None while it is open."""
        return self._ending.outcome

    @property
    def partial_reason(self) -> str | None:
        return self._ending.partial_reason

    @property
    def failure_reason(self) -> str | None:
        return self._ending.failure_reason

    def mark_partial(self, reason: str) -> None:
        """The answer will be incomplete because the budget ran out (budget.run.outcome
        `partial`)."""
        self._ending.mark_partial(reason)

    def set_outcome(self, outcome: RunOutcome) -> None:
        """The run's outcome in your words (checked: an unknown word is a ValueError)."""
        self._ending.set_outcome(outcome)

    def ran_out(self) -> bool:
        """Whether the budget is what cut this run short: it expired or only the reserve is
        left, a call was refused for lack of it, or a call timed out on a slice the run (not
        the call's own cap) decided."""
        return self._ending.ran_out()

    def finish(self, value: T, *, done: Sequence[str] = (), missing: Sequence[str] = (),
               exhausted: bool | None = None) -> RunResult[T]:
        """Label the answer with why it is what it is. Nothing `missing`: complete. Missing
        parts because the budget ran out (`ran_out()`, or `exhausted=True`): partial, "budget
        exhausted after N steps; complete: …; not included: …" (budget.run.outcome
        `partial`). Missing parts for another reason (a failed call, `exhausted=False`):
        failed, "failed after N steps: <the last failed step and its class>; not included: …"
        (budget.run.outcome `failed`)."""
        return self._ending.finish(value, done, missing, exhausted)

    def sleep(self, duration: Duration) -> None:
        """Sleep on this budget's clock (a ManualClock just moves)."""
        sleep_on(self.clock, seconds(duration, "sleep"))

    async def asleep(self, duration: Duration) -> None:
        await asleep_on(self.clock, seconds(duration, "sleep"))

    async def bound(self, work: Awaitable[T], *, landing: bool = True) -> T:
        """Await `work` (a whole framework run) no later than the deadline (`landing=False`:
        no later than the start of the reserve). On expiry the work is cancelled, its cleanup
        awaited and timed (a `budget.cleanup` event on the run span) and StepTimeout raised,
        which makes the run `exhausted`."""
        task = asyncio.ensure_future(work)
        limit = self.remaining() if landing else self.spendable()
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        wait_ended = self.clock.monotonic()
        task.cancel()
        finished, _ = await asyncio.wait({task}, timeout=max(self.reserve_s, 0.05))
        cleanup_ms = milliseconds(self.clock.monotonic() - wait_ended)
        if task in finished and not task.cancelled():
            task.exception()
        self.span.add_event("budget.cleanup", {attr.CLEANUP_MS: cleanup_ms,
                                               "budget.cleanup_finished": task in finished})
        raise StepTimeout(f"the run reached its deadline ({milliseconds(limit)} ms left when the "
                          "work started)", deadline_ms=milliseconds(limit), cleanup_ms=cleanup_ms)

    # -- the run span ----------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        """Whether the run has ended (its `with` block is over)."""
        return self._ended

    @property
    def is_open(self) -> bool:
        return self._started and not self._ended

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("use the RunBudget as a context manager (`with RunBudget(...)`) "
                               "before spending from it")

    def _run_attributes(self) -> dict[str, Any]:
        values: dict[str, Any] = {attr.TOTAL_MS: milliseconds(self.total_s),
                                  attr.DEADLINE_UNIX_MS: self.deadline_unix_ms,
                                  attr.RESERVE_MS: milliseconds(self.reserve_s),
                                  **self.ledger.run_attributes()}
        if self.agent:
            values[attr.GEN_AI_AGENT_NAME] = self.agent
        values.update(self._remote_attributes())
        values.update(self._extra)
        return values

    def _remote_attributes(self) -> dict[str, Any]:
        if self.remote is None:
            return {}
        values: dict[str, Any] = {attr.REMOTE_SOURCE: self.remote.source}
        if self.remote.problem is not None:
            values[attr.REMOTE_PROBLEM] = self.remote.problem
        return values

    def _enter(self) -> RunBudget:
        if self._started:
            raise RuntimeError("a RunBudget is entered once, for one run")
        enclosing = self._nesting.open_around()
        if enclosing is not None and self._nesting.joins(self.separate_run):
            self._nesting.nest_in(self, enclosing)
        if self.as_step is not None:
            return self._enter_as_step()
        self._start_mono = self.clock.monotonic()
        self._start_ns = self.clock.wall_ns()
        # The deadline is whole milliseconds (budget.deadline_unix_ms, Deadline-Epoch-Ms), so
        # the budget counts from the start of the millisecond it began in: the deadline it
        # enforces is then exactly the one it records and propagates.
        origin = self._start_ns if self._arrived_unix_ns is None else self._arrived_unix_ns
        origin -= origin % 1_000_000
        self._spent_before_s = max(0.0, (self._start_ns - origin) / 1e9)
        self._origin_ns = self._start_ns - int(round(self._spent_before_s * 1e9))
        self._started = True
        self._admission.start(self._origin_ns)
        current = trace.get_current_span()
        if self.decorate_current and current.is_recording() and enclosing is None:
            self.span = current
            self._span_context = trace.set_span_in_context(current)
        else:
            parent: Context | None = None
            links: list[trace.Link] = []
            if self.separate_run and current.get_span_context().is_valid:
                # A run of its own: the root of a new trace, linked to where it was started.
                parent = Context()
                links.append(trace.Link(current.get_span_context()))
            self.span = self.tracer.start_span(self.name, context=parent, links=links or None,
                                               start_time=self._start_ns)
            self._owns_span = True
            self._span_context = trace.set_span_in_context(self.span)
        if self._nesting.continues_caller:
            # A service spending its caller's deadline: not a run of its own (no
            # budget.total_ms), so its steps are steps of the caller's run.
            self.span.set_attributes({attr.REMAINING_MS: milliseconds(self.remaining()),
                                      **self._remote_attributes()})
        else:
            self.span.set_attributes(self._run_attributes())
        self._nesting.enter(self, self._span_context)
        return self

    def _enter_as_step(self) -> RunBudget:
        step = self.as_step
        assert step is not None
        step._open()
        self._start_mono = step._started_mono
        self._start_ns = step._start_ns
        self._origin_ns = self._start_ns
        self._started = True
        self._admission.start(self._origin_ns)
        self.span = step.span
        self._span_context = trace.set_span_in_context(self.span)
        self._nesting.enter(self, self._span_context)
        return self

    def _exit(self, error: BaseException | None) -> None:
        self._admission.observe()  # the rung the run ended on, as an event on its span
        self._ending.decide(error)
        self._ended = True
        if self.as_step is not None:
            # A subagent's budget: its span is its step's, closed as the step closes.
            self._nesting.leave()
            self.as_step._close(error)
            self._end_ns = self.clock.wall_ns()
            return
        self._ending.close(self.span, error, is_run=not self._nesting.continues_caller,
                           owns_span=self._owns_span)
        self._nesting.leave()
        self._end_ns = self.clock.wall_ns()
        if self._owns_span:
            self.span.end(end_time=self._end_ns)

    def __enter__(self) -> RunBudget:
        return self._enter()

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._exit(error)

    async def __aenter__(self) -> RunBudget:
        return self._enter()

    async def __aexit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._exit(error)


class ChildBudget(RunBudget):
    """A subagent's budget: its span is the parent's `subagent` step (not a run of its own, so
    budgetscope rolls the subagent's calls up into that step), its deadline the step's."""

    def __init__(self, step: Step, **options: Any) -> None:
        super().__init__(step.timeout if step.timeout > 0 else 1e-9, **options)
        self._nesting.as_step = step
        if isinstance(step.budget, RunBudget):  # its calls spend the parent's money too
            self.ledger = self.ledger.nested_in(step.budget.ledger)
