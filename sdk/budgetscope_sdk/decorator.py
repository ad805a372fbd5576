"""`@budgeted_tool`: a function whose every call is a step of the current run.

    @budgeted_tool("tool", "fetch_report", cap=9, minimum=0.5)
    async def fetch_report(quarter: str) -> dict[str, str]: ...

Each call takes its slice when it starts (refused with BudgetExhausted when it does not fit),
and our deadline firing comes back as a TimedOut result instead of an exception. An async
function is cancelled at the deadline (`Step.run`); a sync one runs in the caller's thread,
bounded by the httpx transports and `current_step().check()`, or in a worker thread that is
abandoned at the deadline with `thread=True` (`Step.run_sync`). A write's idempotency key is
its intent's: the tool's name and its arguments, so calling it again with the same arguments
carries the same key (the function reads it from `current_step().idempotency_key`; the
transports send it). Outside any run the function is called as written, with no deadline."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

from budgetscope_sdk.attributes import SideEffect, StepKind
from budgetscope_sdk.budget import Duration, RunBudget, current_budget
from budgetscope_sdk.intents import Intent
from budgetscope_sdk.results import TimedOut
from budgetscope_sdk.step import Step

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    P = ParamSpec("P")

T = TypeVar("T")


class BudgetedTool:
    """The decorator `budgeted_tool(...)` returns."""

    def __init__(self, kind: StepKind, name: str | None, cap: Duration | None,
                 minimum: Duration, side_effect: SideEffect, thread: bool) -> None:
        self.kind: StepKind = kind
        self.name = name
        self.cap = cap
        self.minimum = minimum
        self.side_effect: SideEffect = side_effect
        self.thread = thread

    def _open(self, budget: RunBudget, name: str, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> tuple[Step, Intent | None]:
        if self.side_effect != "write":
            return budget.step(self.kind, name, side_effect=self.side_effect, cap=self.cap,
                               minimum=self.minimum), None
        arguments = json.dumps([list(args), kwargs], sort_keys=True, default=str)
        intent = budget.intent(name, arguments)
        return intent.attempt(self.kind, name, side_effect="write", cap=self.cap,
                              minimum=self.minimum), intent

    @staticmethod
    def _timed_out(step: Step, intent: Intent | None) -> TimedOut | None:
        if step.outcome != "client_timeout":
            return None
        return intent.timed_out() if intent is not None else step.timed_out()

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, T]]
                 ) -> Callable[P, Coroutine[Any, Any, T | TimedOut]]: ...

    @overload
    def __call__(self, fn: Callable[P, T]) -> Callable[P, T | TimedOut]: ...

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = self.name or fn.__name__
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                budget = current_budget()
                if budget is None:
                    return await fn(*args, **kwargs)
                step, intent = self._open(budget, name, args, kwargs)
                try:
                    async with step:
                        return await step.run(fn(*args, **kwargs))
                except Exception:
                    result = self._timed_out(step, intent)
                    if result is None:
                        raise
                    return result

            return run_async

        @functools.wraps(fn)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            budget = current_budget()
            if budget is None:
                return fn(*args, **kwargs)
            step, intent = self._open(budget, name, args, kwargs)
            try:
                with step:
                    if self.thread:
                        return step.run_sync(fn, *args, **kwargs)
                    return fn(*args, **kwargs)
            except Exception:
                result = self._timed_out(step, intent)
                if result is None:
                    raise
                return result

        return run_sync


def budgeted_tool(kind: StepKind = "tool", name: str | None = None, *,
                  cap: Duration | None = None, minimum: Duration = 0.0,
                  side_effect: SideEffect = "read", thread: bool = False) -> BudgetedTool:
    """Make every call of the decorated function (sync or async) a `kind` step named `name`
    (default the function's name) of the current run, with its own `cap` and the `minimum`
    below which it is refused. Returns the function's result, or a TimedOut when our deadline
    fired and its timeout left the function (a timeout the function handled is recorded on
    the step, and what the function returned is returned)."""
    return BudgetedTool(kind, name, cap, minimum, side_effect, thread)
