"""Tool calls whose timeout comes back as a TimedOut result instead of an exception, ready to
hand to a model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from budgetscope_sdk.attributes import SideEffect
from budgetscope_sdk.durations import Duration, seconds
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.results import TimedOut
from budgetscope_sdk.step import Step

if TYPE_CHECKING:
    from budgetscope_sdk.budget import RunBudget
    from budgetscope_sdk.intents import Intent

T = TypeVar("T")


def _open(budget: RunBudget, name: str, side_effect: SideEffect, intent: Intent | None,
          cap: Duration | None, minimum: Duration, options: dict[str, Any]) -> Step:
    if intent is not None:
        return intent.attempt("tool", name, side_effect=side_effect, cap=cap, minimum=minimum,
                              **options)
    return budget.step("tool", name, side_effect=side_effect, cap=cap, minimum=minimum,
                       **options)


async def run_tool(budget: RunBudget, name: str, call: Callable[[Step], Awaitable[T]], *,
                   side_effect: SideEffect = "read", intent: Intent | None = None,
                   cap: Duration | None = None, minimum: Duration = 0.0,
                   **options: Any) -> T | TimedOut:
    """Await `call(step)` within the tool's slice (enforced by step.run, cleanup measured).
    Our deadline firing gives a TimedOut; refusals and other failures still raise."""
    step = _open(budget, name, side_effect, intent, cap, minimum, options)
    try:
        async with step:
            return await step.run(call(step))
    except Exception:
        if step.outcome == "client_timeout":
            return step.timed_out() if intent is None else intent.timed_out()
        raise


def call_tool(budget: RunBudget, name: str, call: Callable[[Step], T], *,
              side_effect: SideEffect = "read", intent: Intent | None = None,
              cap: Duration | None = None, minimum: Duration = 0.0,
              **options: Any) -> T | TimedOut:
    """The sync form, in the caller's thread: `call(step)` is bounded by the httpx transports
    (for requests made inside it) or by `step.check()`; use `step.run_sync` inside it to
    abandon a call that cannot bound itself. Our timeout, raised or handled inside `call`,
    gives a TimedOut when it leaves `call`."""
    step = _open(budget, name, side_effect, intent, cap, minimum, options)
    try:
        with step:
            return call(step)
    except Exception:
        if step.outcome == "client_timeout":
            return step.timed_out() if intent is None else intent.timed_out()
        raise


async def hedged_read(budget: RunBudget, name: str, call: Callable[[Step], Awaitable[T]], *,
                      after: Duration | None = None, cap: Duration | None = None,
                      minimum: Duration = 0.0) -> T:
    """An idempotent read with at most one hedge: when the first call has not answered after
    `after` seconds (default: the recorded p95 of tool:name; no history, no hedge), a second
    copy starts as its own step with budget.hedge = true, if the budget admits it. The first
    answer wins and the other call is cancelled (its step says `cancelled`). Never for writes."""

    async def attempt(step: Step) -> T:
        async with step:
            return await step.run(call(step))

    first = asyncio.ensure_future(attempt(
        budget.step("tool", name, side_effect="read", cap=cap, minimum=minimum)))
    delay = seconds(after, "after") if after is not None else budget.latencies.p95(
        f"tool:{name}")
    if delay is None:
        return await first
    done, _ = await asyncio.wait({first}, timeout=delay)
    if first in done:
        return first.result()
    try:
        hedge_step = budget.step("tool", name, side_effect="read", cap=cap, minimum=minimum,
                                 hedge=True)
    except BudgetExhausted:
        return await first  # no room for a second copy: wait for the first alone
    second = asyncio.ensure_future(attempt(hedge_step))
    racing = {first, second}
    failure: BaseException | None = None
    try:
        while racing:
            done, racing = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.exception() is None:
                    return task.result()
                failure = failure or task.exception()
    finally:
        for task in racing:
            task.cancel()
        if racing:
            await asyncio.wait(racing)
    assert failure is not None
    raise failure
