"""Admission: whether a step of a run may start, and with what. A step is admitted by time
first: its slice is min(cap, what is left beyond the reserve, or all that is left for a landing
step), and it is refused when that is below its minimum or when the ladder no longer admits it
(ladder.py: `widening` steps stop at 60% of any budget; from 80%, a step whose recorded p95 does
not fit is refused). Then by money and tokens (ledger.Ledger.admit: the output it may generate,
what it holds while in flight). A refused step leaves a `refused` span, with the budget that
refused it when that is not time (budget.refused_by), and raises BudgetExhausted before
anything starts.

The run (budget.py) holds one Admission, which answers RunBudget.step, .slice, .cap_for and
.phase; the run tells it when it starts (`start`), so that the ladder's events are stamped from
where the run's clock started."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span

from budgetscope_sdk import attributes as attr
from budgetscope_sdk import ladder
from budgetscope_sdk.attributes import SideEffect, StepKind
from budgetscope_sdk.durations import Duration, milliseconds, seconds
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.ledger import Ledger
from budgetscope_sdk.price import Price
from budgetscope_sdk.step import Step, StepBudget


class AdmittingRun(StepBudget, Protocol):
    """What admission reads of the run it admits steps to (and what the steps it makes need of
    it): a RunBudget, written here as an interface so that this module, which budget.py
    imports, does not import budget.py back."""

    span: Span
    ledger: Ledger
    total_s: float
    reserve_s: float
    per_step_caps: dict[str, float]
    latencies: ladder.LatencyBook

    def elapsed(self) -> float: ...


class Admission:
    """The admission of one run's steps, and the run's place on the ladder (which only moves
    down: reading it records each change as a `budget.phase` event on the run span)."""

    def __init__(self, run: AdmittingRun, require_started: Callable[[], None]) -> None:
        self._run = run
        # The run's own check that it has been entered (its error names `with RunBudget`),
        # made first, before anything else is looked at.
        self._require_started = require_started
        self._ladder = ladder.PhaseTracker()
        self._origin_ns = 0

    def start(self, origin_ns: int) -> None:
        """The run has started, its budget's clock at `origin_ns` (the wall clock's ns)."""
        self._origin_ns = origin_ns

    # -- the ladder ------------------------------------------------------------------------
    def observe(self) -> str:
        """The run's phase now: the furthest rung its time, or its money and tokens, reached."""
        run = self._run
        ledger = run.ledger
        return self._ladder.observe(run.span, run.elapsed(), run.total_s, run.reserve_s,
                                    self._origin_ns, ledger.phase() if ledger.active else None,
                                    run.clock.wall_ns)

    # -- time ------------------------------------------------------------------------------
    def cap_for(self, kind: str, name: str) -> float | None:
        caps = self._run.per_step_caps
        return caps.get(f"{kind}:{name}", caps.get(name))

    def admit(self, kind: StepKind, name: str, cap: Duration | None, minimum: Duration,
              landing: bool, widening: bool, refusal_attributes: dict[str, Any]
              ) -> tuple[float, float, float | None]:
        """(the slice, the time remaining, the cap) of a step the time budget and the ladder
        admit; otherwise its `refused` span is recorded (with `refusal_attributes`) and
        BudgetExhausted raised."""
        run = self._run
        self._require_started()
        if kind not in attr.STEP_KINDS:
            raise ValueError(f"unknown step kind {kind!r}; one of {sorted(attr.STEP_KINDS)}")
        if run.ended:
            # Its span has ended and its deadline no longer means anything: nothing may
            # start, and no span is recorded under a run that is over.
            raise BudgetExhausted(f"refused {kind}:{name}: its run has ended",
                                  step_key=f"{kind}:{name}")
        cap_s = seconds(cap, "cap") if cap is not None else self.cap_for(kind, name)
        minimum_s = seconds(minimum, "minimum")
        remaining = run.remaining()
        phase = self.observe()
        available = remaining if landing else max(0.0, remaining - run.reserve_s)
        allocated = available if cap_s is None else min(cap_s, available)
        reason, by = None, "time"
        if allocated <= 0 or allocated < minimum_s:
            left, needs = milliseconds(available), milliseconds(minimum_s)
            reason = (f"{left} ms left beyond the reserve, {kind}:{name} needs {needs} ms"
                      if not landing else f"{left} ms left, {kind}:{name} needs {needs} ms")
        elif widening and phase != ladder.OPEN:  # refused by whichever budget moved the ladder
            reason, by = f"{phase}: no new branches once 60% of a budget is spent", self._ladder.by
        elif not landing and ladder.phase_index(phase) >= ladder.phase_index(ladder.FIT_ONLY):
            p95 = run.latencies.p95(f"{kind}:{name}")
            if p95 is not None and p95 > available:
                reason = (f"{phase}: {kind}:{name} p95 {milliseconds(p95)} ms does not fit in "
                          f"{milliseconds(available)} ms")
        if reason is not None:
            if by != "time":
                refusal_attributes[attr.REFUSED_BY] = by
            self._record_refusal(kind, name, remaining, cap_s, max(0.0, allocated),
                                 refusal_attributes)
            raise BudgetExhausted(f"refused {kind}:{name}: {reason}", step_key=f"{kind}:{name}",
                                  available_ms=milliseconds(available),
                                  minimum_ms=milliseconds(minimum_s), refused_by=by)
        return allocated, remaining, cap_s

    def _record_refusal(self, kind: StepKind, name: str, remaining: float,
                        cap_s: float | None, allocated: float, extra: dict[str, Any]) -> None:
        run = self._run
        refused = Step(run, kind, name, allocated_s=allocated, remaining_s=remaining,
                       cap_s=cap_s,
                       side_effect=extra.pop("side_effect", None),
                       idempotency_key=extra.pop("idempotency_key", None),
                       attempt=extra.pop("attempt", None), hedge=extra.pop("hedge", None),
                       links=extra.pop("links", ()), extra={**run.ledger.stamps(), **extra})
        refused.set_outcome("refused")
        refused.admitted = False
        refused._open()
        refused._close(None)

    # -- a step: time, then money and tokens ------------------------------------------------
    def step(self, kind: StepKind, name: str, *, side_effect: SideEffect | None,
             idempotency_key: str | None, cap: Duration | None, minimum: Duration,
             attempt: int | None, hedge: bool | None, landing: bool, widening: bool,
             attributes: Mapping[str, Any] | None, links: Sequence[trace.Link],
             max_output_tokens: int | None, price: Price | None, estimate_usd: float | None,
             input_tokens: int | None, minimum_output_tokens: int) -> Step:
        """The step RunBudget.step describes, admitted, or its refusal raised."""
        if side_effect is not None and side_effect not in attr.SIDE_EFFECTS:
            raise ValueError(f"side_effect must be 'read' or 'write', got {side_effect!r}")
        if attempt is not None and attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        # Every step says which attempt it is and whether it is a hedge (first, not a hedge,
        # unless told), so a reader never has to guess from an absent attribute.
        attempt = 1 if attempt is None else attempt
        hedge = False if hedge is None else hedge
        refusal = {"side_effect": side_effect, "idempotency_key": idempotency_key,
                   "attempt": attempt, "hedge": hedge, "links": tuple(links),
                   **dict(attributes or {})}
        allocated, remaining, cap_s = self.admit(kind, name, cap, minimum, landing, widening,
                                                 refusal)
        spend = self._run.ledger.admit(kind, name, landing, max_output_tokens=max_output_tokens,
                                       minimum_output_tokens=minimum_output_tokens,
                                       price=price, estimate_usd=estimate_usd,
                                       input_tokens=input_tokens)
        if spend is not None and spend.refused_by is not None:
            self._record_refusal(kind, name, remaining, cap_s, 0.0,
                                 {**refusal, **spend.attributes})
            raise spend.refusal(f"{kind}:{name}")
        return Step(self._run, kind, name, allocated_s=allocated, remaining_s=remaining,
                    cap_s=cap_s, side_effect=side_effect, idempotency_key=idempotency_key,
                    attempt=attempt, hedge=hedge, extra=dict(attributes or {}), links=links,
                    spend=spend)
