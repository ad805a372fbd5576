"""Intents: one idempotency key per logical operation, minted before the first attempt and
carried by every retry; retries done as proxies do them (full jitter, Retry-After honoured, a
retry budget) with each wait recorded as a step; and the reconcile read that settles whether a
write whose effect is uncertain landed, before anything re-sends it."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span

from budgetscope_sdk import attributes as attr
from budgetscope_sdk.attributes import ReconcileResult, SideEffect, StepKind
from budgetscope_sdk.clock import Clock
from budgetscope_sdk.durations import Duration, seconds
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.results import TimedOut, timed_out
from budgetscope_sdk.retry_after import retry_after_of
from budgetscope_sdk.retry_budget import RetryBudget
from budgetscope_sdk.step import Step

T = TypeVar("T")

RETRY_ON = frozenset({"client_timeout", "upstream_error"})
_JITTER = random.Random()  # its own generator: seeding the global one elsewhere never aligns us


class IntentBudget(Protocol):
    """What an intent, its retries and its reconcile reads need of the run they spend: a
    RunBudget, written here as an interface so that this module, which budget.py imports, does
    not import budget.py back."""

    @property
    def intent_namespace(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def span(self) -> Span: ...

    @property
    def retry_budget(self) -> RetryBudget | None: ...

    def step(self, kind: StepKind, name: str, *, side_effect: SideEffect | None = None,
             idempotency_key: str | None = None, cap: Duration | None = None,
             minimum: Duration = 0.0, attempt: int | None = None, hedge: bool | None = None,
             landing: bool = False, widening: bool = False,
             attributes: Mapping[str, Any] | None = None,
             links: Sequence[trace.Link] = ()) -> Step: ...

    def spendable(self) -> float: ...

    def sleep(self, duration: Duration) -> None: ...

    async def asleep(self, duration: Duration) -> None: ...


@dataclass(frozen=True)
class Reconciled:
    """What a reconcile read found: `landed`, `not_landed` or `unknown`, and what it read."""

    result: ReconcileResult
    value: Any = None


def _result_of(found: Any) -> ReconcileResult:
    if isinstance(found, str):
        if found not in attr.RECONCILE_RESULTS:
            raise ValueError(f"a reconcile read returns landed/not_landed/unknown, a bool or "
                             f"None, got {found!r}")
        return found  # type: ignore[return-value]
    if found is None:
        return "unknown"
    return "landed" if found else "not_landed"


class Intent:
    """A logical operation (`cancel_subscription` of `sub_42`) and its idempotency key.

    The key is derived from the run's namespace, the operation and its parts, so asking for the
    same intent twice in a run gives the same key, and another run gets another."""

    def __init__(self, budget: IntentBudget, operation: str, parts: tuple[str, ...]) -> None:
        self.budget = budget
        self.operation = operation
        self.parts = parts
        digest = hashlib.sha256("\x1f".join((budget.intent_namespace, operation, *parts))
                                .encode()).hexdigest()[:20]
        self.key = f"{operation}-{digest}"
        self.attempts = 0
        self.effect_status: str | None = None
        self.last_step: Step | None = None

    def attempt(self, kind: StepKind = "tool", name: str | None = None, *,
                side_effect: SideEffect = "write", cap: Duration | None = None,
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
        step.settle(result)
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


class _ReadBack:
    """Adapts a retry's `reconcile` (the write's result if it landed, None if it did not) to a
    reconcile read, keeping the value to return."""

    def __init__(self, reconcile: Callable[[Step], Any]) -> None:
        self._reconcile = reconcile
        self.value: Any = None

    def _found(self, value: Any) -> str:
        self.value = value
        return "not_landed" if value is None else "landed"

    def read(self, step: Step) -> str:
        return self._found(self._reconcile(step))

    async def aread(self, step: Step) -> str:
        return self._found(await self._reconcile(step))


class _Retrier:
    """The decisions shared by the sync and async retry loops."""

    def __init__(self, budget: IntentBudget, intent: Intent, kind: StepKind, name: str | None,
                 side_effect: SideEffect, attempts: int, backoff: float, factor: float,
                 max_backoff: float | None, jitter: bool, retry_on: Iterable[str],
                 cap: Duration | None, minimum: Duration, idempotent: bool,
                 retry_budget: RetryBudget | None, reconciles: bool) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.budget = budget
        self.intent = intent
        self.kind: StepKind = kind
        self.name = name or intent.operation
        self.side_effect: SideEffect = side_effect
        self.attempts = attempts
        self.backoff = seconds(backoff, "backoff")
        self.factor = factor
        self.max_backoff = None if max_backoff is None else seconds(max_backoff, "max_backoff")
        self.jitter = jitter
        self.retry_on = frozenset(retry_on)
        self.cap = cap
        self.minimum = seconds(minimum, "minimum")
        self.idempotent = idempotent
        self.retry_budget = retry_budget if retry_budget is not None else budget.retry_budget
        self.reconciles = reconciles

    def step(self, number: int) -> Step:
        if number == 1 and self.retry_budget is not None:
            self.retry_budget.record_request()
        return self.intent.attempt(self.kind, self.name, side_effect=self.side_effect,
                                   cap=self.cap, minimum=self.minimum)

    def needs_read_back(self, step: Step) -> bool:
        """A write that may have taken effect is not re-sent blind: read back first, unless
        the server deduplicates by the key."""
        return (self.side_effect == "write" and step.effect_status == "possible"
                and not self.idempotent)

    def refusal(self, step: Step, error: BaseException, number: int) -> str | None:
        """Why attempt `number + 1` must not be made (None: it may, time permitting)."""
        if step.outcome not in self.retry_on:
            return f"{step.outcome} is not retried"
        if number >= self.attempts:
            return f"all {self.attempts} attempts made"
        if self.needs_read_back(step) and not self.reconciles:
            return ("the write may have taken effect; give reconcile= to read it back, or "
                    "idempotent=True if the server deduplicates by Idempotency-Key")
        return None

    def asked(self, step: Step, error: BaseException) -> float | None:
        """The wait the other side asked for (Retry-After): on the exception's response, else
        on the last response the transports saw in the attempt."""
        asked = retry_after_of(error, self.budget.clock.wall_ns() / 1e9)
        return step.retry_after_s if asked is None else asked

    def wait_before(self, number: int, asked: float | None) -> float:
        """Full jitter (a uniform draw up to the exponential backoff), at least what the other
        side asked for."""
        ceiling = self.backoff * self.factor ** (number - 2)
        if self.max_backoff is not None:
            ceiling = min(ceiling, self.max_backoff)
        wait = _JITTER.uniform(0.0, ceiling) if self.jitter else ceiling
        return wait if asked is None else max(wait, asked)

    def admit(self, number: int, wait: float, asked: float | None) -> str | None:
        """Why the wait and the next attempt do not fit (None: they do), spending a token of
        the retry budget when they do."""
        left = self.budget.spendable()
        if left < wait + max(self.minimum, 1e-3):
            what = f"Retry-After {round(asked * 1000)} ms" if asked is not None and \
                asked >= wait else f"a {round(wait * 1000)} ms backoff"
            return (f"{what} and attempt {number}'s minimum do not fit in the "
                    f"{round(left * 1000)} ms left")
        if self.retry_budget is not None and not self.retry_budget.try_retry():
            return "the process's retry budget is spent"
        return None

    def backoff_step(self, number: int, wait: float) -> Step | None:
        """The wait before attempt `number`, as a `backoff` step (none for a wait under 1 ms:
        a jittered draw near zero is no wait worth recording)."""
        if wait < 1e-3:
            return None
        return self.budget.step("backoff", self.name, cap=wait, minimum=wait, attempt=number,
                                idempotency_key=self.intent.key)

    def decline(self, number: int, reason: str) -> None:
        self.budget.span.add_event(attr.RETRY_DECLINED_EVENT, {
            attr.IDEMPOTENCY_KEY: self.intent.key, attr.ATTEMPT: number,
            attr.RETRY_REASON: reason})


def retry(budget: IntentBudget, intent: Intent, call: Callable[[Step], T], *,
          reconcile: Callable[[Step], T | None] | None = None, kind: StepKind = "tool",
          name: str | None = None, side_effect: SideEffect = "write", attempts: int = 3,
          backoff: float = 0.25, factor: float = 2.0, max_backoff: float | None = None,
          jitter: bool = True, retry_on: Iterable[str] = RETRY_ON,
          cap: Duration | None = None, minimum: Duration = 0.0, idempotent: bool = False,
          retry_budget: RetryBudget | None = None) -> T:
    """Run `call(step)` as attempts of `intent`; see RunBudget.retry.

    `backoff` × `factor`^(n−2), capped by `max_backoff`, is the ceiling of attempt n's wait;
    `jitter=True` draws the wait uniformly below it (full jitter), and a Retry-After the
    failed attempt carried (on the exception's response, or seen by the httpx transports) is
    the least it waits. `reconcile(step)` returns the write's result if it landed, None if it
    did not; raising leaves it unknown. `retry_budget` (default the run's) bounds retries
    process-wide."""
    plan = _Retrier(budget, intent, kind, name, side_effect, attempts, backoff, factor,
                    max_backoff, jitter, retry_on, cap, minimum, idempotent, retry_budget,
                    reconcile is not None)
    number = 1
    while True:
        step = plan.step(number)
        try:
            with step:
                return call(step)
        except BudgetExhausted:
            raise
        except Exception as error:
            reason = plan.refusal(step, error, number)
            if reason is None and plan.needs_read_back(step):
                assert reconcile is not None
                back = _ReadBack(reconcile)
                try:
                    found = intent.reconcile(back.read, name=plan.name)
                except BudgetExhausted:
                    found = Reconciled("unknown")
                if found.result == "landed":
                    return back.value  # type: ignore[no-any-return]
                if found.result == "unknown":
                    reason = "the read-back could not tell whether the write landed"
            number += 1
            wait = 0.0
            if reason is None:
                asked = plan.asked(step, error)
                wait = plan.wait_before(number, asked)
                reason = plan.admit(number, wait, asked)
            if reason is not None:
                plan.decline(number, reason)
                raise
            pause = plan.backoff_step(number, wait)
            if pause is not None:
                with pause:
                    budget.sleep(pause.timeout)


async def aretry(budget: IntentBudget, intent: Intent, call: Callable[[Step], Awaitable[T]], *,
                 reconcile: Callable[[Step], Awaitable[T | None]] | None = None,
                 kind: StepKind = "tool", name: str | None = None,
                 side_effect: SideEffect = "write", attempts: int = 3, backoff: float = 0.25,
                 factor: float = 2.0, max_backoff: float | None = None, jitter: bool = True,
                 retry_on: Iterable[str] = RETRY_ON, cap: Duration | None = None,
                 minimum: Duration = 0.0, idempotent: bool = False,
                 retry_budget: RetryBudget | None = None) -> T:
    """The asyncio form of `retry`: `call(step)` and `reconcile(step)` are awaited."""
    plan = _Retrier(budget, intent, kind, name, side_effect, attempts, backoff, factor,
                    max_backoff, jitter, retry_on, cap, minimum, idempotent, retry_budget,
                    reconcile is not None)
    number = 1
    while True:
        step = plan.step(number)
        try:
            async with step:
                return await call(step)
        except BudgetExhausted:
            raise
        except Exception as error:
            reason = plan.refusal(step, error, number)
            if reason is None and plan.needs_read_back(step):
                assert reconcile is not None
                back = _ReadBack(reconcile)
                try:
                    found = await intent.areconcile(back.aread, name=plan.name)
                except BudgetExhausted:
                    found = Reconciled("unknown")
                if found.result == "landed":
                    return back.value  # type: ignore[no-any-return]
                if found.result == "unknown":
                    reason = "the read-back could not tell whether the write landed"
            number += 1
            wait = 0.0
            if reason is None:
                asked = plan.asked(step, error)
                wait = plan.wait_before(number, asked)
                reason = plan.admit(number, wait, asked)
            if reason is not None:
                plan.decline(number, reason)
                raise
            pause = plan.backoff_step(number, wait)
            if pause is not None:
                async with pause:
                    await budget.asleep(pause.timeout)
