"""How a run ends: its outcome (budget.run.outcome), the budget that exhausted it when that is
money or tokens rather than time (budget.run.exhausted_by), the note that says why
(budget.partial.reason, budget.failure.reason), and the answer labelled with it (RunResult).

The outcome, first match wins: the agent's own word (`set_outcome`, or `finish` finding a
failure); the exception that left the run (cancelled; exhausted for a refusal, or for a timeout
once the deadline has passed; failed otherwise); `partial` when marked so (`mark_partial`,
`finish` finding that the budget ran out); `exhausted` past the deadline; `partial` when calls
were refused for lack of budget; else `completed`.

The run (budget.py) holds one Ending: it hands over each finished step's record (`note`), asks
for the outcome as it exits (`decide`) and has the closing attributes written on its span
(`close`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from opentelemetry.trace import Span, Status, StatusCode

from budgetscope_sdk import attributes as attr
from budgetscope_sdk import ladder
from budgetscope_sdk.attributes import RunOutcome
from budgetscope_sdk.classify import qualified_type
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout
from budgetscope_sdk.ledger import Ledger
from budgetscope_sdk.step import StepRecord

T = TypeVar("T")


@dataclass
class RunResult(Generic[T]):
    """An answer labelled with how the run ended: `outcome` `completed`, `partial` (the budget
    ran out; `partial` is True) or `failed` (something else went wrong), what is `missing`,
    and a one-line `note` saying so."""

    value: T
    partial: bool
    note: str
    missing: Sequence[str] = field(default_factory=tuple)
    outcome: RunOutcome = "completed"


class EndingRun(Protocol):
    """What the ending reads of its run: a RunBudget, written here as an interface so that this
    module, which budget.py imports, does not import budget.py back."""

    ledger: Ledger

    @property
    def phase(self) -> str: ...

    def expired(self) -> bool: ...

    def spendable(self) -> float: ...


class Ending:
    """The records of one run's finished steps, what the agent said of its outcome, and the
    outcome they make."""

    def __init__(self, run: EndingRun) -> None:
        self._run = run
        self.records: list[StepRecord] = []
        self.refused = 0  # steps refused for lack of time, money or tokens
        self.outcome: RunOutcome | None = None
        self.partial_reason: str | None = None
        self.failure_reason: str | None = None
        self._explicit_outcome: RunOutcome | None = None

    def note(self, record: StepRecord) -> None:
        """A step of the run has finished."""
        self.records.append(record)
        if record.outcome == "refused":
            self.refused += 1

    # -- what the agent says ---------------------------------------------------------------
    def mark_partial(self, reason: str) -> None:
        self.partial_reason = reason

    def set_outcome(self, outcome: RunOutcome) -> None:
        if outcome not in attr.RUN_OUTCOMES:
            raise ValueError(f"unknown run outcome {outcome!r}; one of {sorted(attr.RUN_OUTCOMES)}")
        self._explicit_outcome = outcome

    def ran_out(self) -> bool:
        run = self._run
        if run.expired() or run.phase == ladder.LANDING or self.refused:
            return True
        return any(record.outcome == "client_timeout" and record.allocated_ms is not None
                   and (record.cap_ms is None or record.allocated_ms < record.cap_ms)
                   for record in self.records)

    def finish(self, value: T, done: Sequence[str], missing: Sequence[str],
               exhausted: bool | None) -> RunResult[T]:
        steps = sum(1 for record in self.records if record.top_level)
        if not missing:
            return RunResult(value, False, f"complete after {steps} steps")
        budget_ran_out = self.ran_out() if exhausted is None else exhausted
        if budget_ran_out:
            note = f"budget exhausted after {steps} steps"
        else:
            note = f"failed after {steps} steps"
            failed = self._unrecovered_failures()
            if failed:
                note += ": " + ", ".join(failed)
        if done:
            note += f"; complete: {', '.join(done)}"
        note += f"; not included: {', '.join(missing)}"
        if budget_ran_out:
            self.mark_partial(note)
            return RunResult(value, True, note, tuple(missing), "partial")
        self.failure_reason = note
        self._explicit_outcome = "failed"
        return RunResult(value, False, note, tuple(missing), "failed")

    def _unrecovered_failures(self) -> list[str]:
        """`kind:name class` of each failed step that nothing made good afterwards: a later
        attempt of the same intent that went well, or a read-back that found the write
        landed, recovers it (distinct, in order, at most three)."""
        found: list[str] = []
        for index, record in enumerate(self.records):
            if record.outcome in ("ok", "refused", "cancelled"):
                continue
            key = record.idempotency_key
            recovered = key is not None and any(
                later.idempotency_key == key and later.outcome == "ok"
                and (later.kind != "reconcile" or later.reconcile_result == "landed")
                for later in self.records[index + 1:])
            text = f"{record.key} {record.outcome}"
            if not recovered and text not in found:
                found.append(text)
        return found[:3]

    # -- the end ---------------------------------------------------------------------------
    def decide(self, error: BaseException | None) -> RunOutcome:
        """The run's outcome as it exits (with `error`, the exception that left it), kept as
        `outcome`."""
        self.outcome = self._outcome_for(error)
        return self.outcome

    def _outcome_for(self, error: BaseException | None) -> RunOutcome:
        if self._explicit_outcome is not None:
            return self._explicit_outcome
        if error is not None:
            if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
                return "cancelled"
            if isinstance(error, BudgetExhausted):
                return "exhausted"
            # asyncio.TimeoutError is only an alias of TimeoutError from Python 3.11.
            if isinstance(error, (StepTimeout, TimeoutError, asyncio.TimeoutError)) \
                    and self._run.expired():
                return "exhausted"
            return "failed"
        if self.partial_reason is not None:
            return "partial"
        if self._run.expired():
            return "exhausted"
        if self.refused:
            self.partial_reason = (f"{self.refused} call(s) refused for lack of budget")
            return "partial"
        return "completed"

    def close(self, span: Span, error: BaseException | None, *, is_run: bool,
              owns_span: bool) -> None:
        """Write the decided outcome on the run's span: budget.run.outcome and
        budget.run.exhausted_by when the span is a run's (not a service's span continuing
        its caller's run); the error that left it, as an error span, when the budget opened
        the span; and the note."""
        assert self.outcome is not None, "decide() first"
        if is_run:
            span.set_attribute(attr.RUN_OUTCOME, self.outcome)
            span.set_attributes(self._run.ledger.outcome_attributes(
                self.outcome, error, self._run.spendable() <= 0))
        if error is not None and owns_span:
            # A run that ended in an error is an error span (what every trace viewer colours),
            # with the error's type as OpenTelemetry's error.type.
            span.set_attribute(attr.ERROR_TYPE, qualified_type(error))
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        if self.partial_reason is not None:
            span.set_attribute(attr.PARTIAL_REASON, self.partial_reason)
        if self.failure_reason is not None:
            span.set_attribute(attr.FAILURE_REASON, self.failure_reason)
