"""Intents: one idempotency key per logical operation, minted before the first attempt and
carried by every retry; retries with their backoff recorded as steps; and the reconcile read
that settles whether a timed-out write landed."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from opentelemetry import trace

from budgetscope_sdk import attributes as attr
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.results import TimedOut
from budgetscope_sdk.step import Step

if TYPE_CHECKING:
    from budgetscope_sdk.budget import Duration, RunBudget

T = TypeVar("T")

RETRY_ON = frozenset({"client_timeout", "upstream_error"})


@dataclass(frozen=True)
class Reconciled:
    """What a reconcile read found: `landed`, `not_landed` or `unknown`, and what it read."""

    result: str
    value: Any = None


def _result_of(found: Any) -> str:
    if isinstance(found, str):
        if found not in attr.RECONCILE_RESULTS:
            raise ValueError(f"a reconcile read returns landed/not_landed/unknown, a bool or "
                             f"None, got {found!r}")
        return found
    if found is None:
        return "unknown"
    return "landed" if found else "not_landed"


class Intent:
    """A logical operation (`cancel_subscription` of `sub_42`) and its idempotency key.

    The key is derived from the run's namespace, the operation and its parts, so asking for the
    same intent twice in a run gives the same key, and another run gets another."""

    def __init__(self, budget: RunBudget, operation: str, parts: tuple[str, ...]) -> None:
        self.budget = budget
        self.operation = operation
        self.parts = parts
        digest = hashlib.sha256("\x1f".join((budget.intent_namespace, operation, *parts))
                                .encode()).hexdigest()[:20]
        self.key = f"{operation}-{digest}"
        self.attempts = 0
        self.effect_status: str | None = None
        self.last_step: Step | None = None

    def attempt(self, kind: str = "tool", name: str | None = None, *,
                side_effect: str = "write", cap: Duration | None = None,
                minimum: Duration = 0.0, **options: Any) -> Step:
        """The next attempt's step, numbered 1, 2, … and carrying the intent's key."""
        number = self.attempts + 1
        step = self.budget.step(kind, name or self.operation, side_effect=side_effect,
                                idempotency_key=self.key, cap=cap, minimum=minimum,
                                attempt=number, **options)
        self.attempts = number
        self.last_step = step
        return step

    def timed_out(self) -> TimedOut:
        if self.last_step is None:
            raise RuntimeError(f"{self.operation} has not been attempted")
        result = self.last_step.timed_out()
        if self.effect_status == "completed":
            from budgetscope_sdk.results import timed_out

            return timed_out(result.tool, result.deadline_ms, side_effect="write",
                             side_effect_status="completed", idempotency_key=self.key,
                             attempt=result.attempt)
        return result

    # -- reconciliation --------------------------------------------------------------------
    def _reconcile_step(self, name: str | None, cap: Duration | None,
                        minimum: Duration, link_to_write: bool) -> Step:
        if link_to_write and self.last_step is not None:
            # The read names the write by a span link to its last attempt instead of the key.
            write = self.last_step.span.get_span_context()
            return self.budget.step("reconcile", name or self.operation, side_effect="read",
                                    cap=cap, minimum=minimum, links=(trace.Link(write),))
        return self.budget.step("reconcile", name or self.operation, side_effect="read",
                                idempotency_key=self.key, cap=cap, minimum=minimum)

    def _settle(self, step: Step, found: Any) -> Reconciled:
        result = _result_of(found)
        step.reconcile_result = result
        if result == "landed":
            self.effect_status = "completed"
        return Reconciled(result, found)

    def reconcile(self, read: Callable[[Step], Any], *, name: str | None = None,
                  cap: Duration | None = None, minimum: Duration = 0.0,
                  link_to_write: bool = False) -> Reconciled:
        """Read the write back by its key: `read(step)` returns True/False (landed or not),
        None (unknown), or one of those words. Recorded as a `reconcile` step with
        budget.reconcile.result; a read that raises is `unknown` and its error is recorded.
        `link_to_write=True` links the step to the write's last attempt instead of carrying
        the key (budgetscope matches either)."""
        step = self._reconcile_step(name, cap, minimum, link_to_write)
        try:
            with step:
                return self._settle(step, read(step))
        except BudgetExhausted:
            raise
        except Exception:  # noqa: BLE001 - the read failing leaves the write unknown
            return Reconciled("unknown")

    async def areconcile(self, read: Callable[[Step], Awaitable[Any]], *,
                         name: str | None = None, cap: Duration | None = None,
                         minimum: Duration = 0.0, link_to_write: bool = False) -> Reconciled:
        step = self._reconcile_step(name, cap, minimum, link_to_write)
        try:
            async with step:
                return self._settle(step, await read(step))
        except BudgetExhausted:
            raise
        except Exception:  # noqa: BLE001
            return Reconciled("unknown")


class _Retrier:
    """The decisions shared by the sync and async retry loops."""

    def __init__(self, budget: RunBudget, intent: Intent, kind: str, name: str | None,
                 side_effect: str, attempts: int, backoff: float, factor: float,
                 retry_on: Iterable[str], cap: Duration | None, minimum: Duration) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.budget = budget
        self.intent = intent
        self.kind = kind
        self.name = name or intent.operation
        self.side_effect = side_effect
        self.attempts = attempts
        self.backoff = backoff
        self.factor = factor
        self.retry_on = frozenset(retry_on)
        self.cap = cap
        self.minimum = minimum

    def step(self) -> Step:
        return self.intent.attempt(self.kind, self.name, side_effect=self.side_effect,
                                   cap=self.cap, minimum=self.minimum)

    def wait_before(self, number: int) -> float:
        return self.backoff * self.factor ** (number - 2)

    def backoff_step(self, number: int) -> Step | None:
        """The backoff before attempt `number`, or None when the wait and then the attempt's
        minimum would not fit (a retry that cannot finish is declined, not started)."""
        wait = self.wait_before(number)
        minimum = float(self.minimum or 0.0)
        if self.budget.spendable() < wait + max(minimum, 1e-3):
            return None
        return self.budget.step("backoff", self.name, cap=wait, minimum=wait, attempt=number,
                                idempotency_key=self.intent.key)

    def should_retry(self, step: Step, number: int) -> bool:
        return number < self.attempts and step.outcome in self.retry_on


def retry(budget: RunBudget, intent: Intent, call: Callable[[Step], T], **options: Any) -> T:
    """Run `call(step)` as attempts of `intent`; see RunBudget.retry."""
    plan = _Retrier(budget, intent, **_options(options))
    number = 1
    while True:
        step = plan.step()
        try:
            with step:
                return call(step)
        except BudgetExhausted:
            raise
        except Exception:
            if not plan.should_retry(step, number):
                raise
            number += 1
            pause = plan.backoff_step(number)
            if pause is None:
                raise
            with pause:
                budget.sleep(pause.timeout)


async def aretry(budget: RunBudget, intent: Intent, call: Callable[[Step], Awaitable[T]],
                 **options: Any) -> T:
    plan = _Retrier(budget, intent, **_options(options))
    number = 1
    while True:
        step = plan.step()
        try:
            async with step:
                return await call(step)
        except BudgetExhausted:
            raise
        except Exception:
            if not plan.should_retry(step, number):
                raise
            number += 1
            pause = plan.backoff_step(number)
            if pause is None:
                raise
            async with pause:
                await budget.asleep(pause.timeout)


def _options(options: dict[str, Any]) -> dict[str, Any]:
    defaults: dict[str, Any] = {"kind": "tool", "name": None, "side_effect": "write",
                                "attempts": 3, "backoff": 0.25, "factor": 2.0,
                                "retry_on": RETRY_ON, "cap": None, "minimum": 0.0}
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"unknown retry option(s): {', '.join(sorted(unknown))}")
    defaults.update(options)
    return defaults
