"""What both framework adapters do around a tool call: take a slice from the current budget,
enforce it on the awaited call, and turn our timeout or a refusal into a result the model reads.

A write tool's idempotency key is its intent's: the tool's name and its arguments, so the model
calling it again with the same arguments carries the same key (tool code reads it from
`current_step().idempotency_key`)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from budgetscope_sdk.attributes import SideEffect
from budgetscope_sdk.budget import Duration, RunBudget, current_budget
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.step import Step


@dataclass(frozen=True)
class ToolPolicy:
    """How one tool spends the budget: `side_effect` read/write, its own `cap` (seconds; else
    the budget's per_step_caps), and the `minimum` below which it is refused."""

    side_effect: SideEffect = "read"
    cap: Duration | None = None
    minimum: Duration = 0.0


def policy_for(policies: Mapping[str, ToolPolicy] | None, name: str) -> ToolPolicy:
    return (policies or {}).get(name, ToolPolicy())


def refused_result(name: str, error: BudgetExhausted) -> dict[str, Any]:
    return {"status": "refused", "tool": name, "side_effect_status": "none",
            "retryable": False,
            "hint": f"{name} was not started: {error}. Answer with what you have and say "
                    "what is missing."}


def least(first: int | None, second: int | None) -> int | None:
    """The smaller of two output ceilings, either of which may be unset."""
    if first is None or second is None:
        return second if first is None else first
    return min(first, second)


def require_budget(framework: str) -> RunBudget:
    budget = current_budget()
    if budget is None:
        raise RuntimeError(f"a budgeted {framework} tool was called outside `with RunBudget(...)`")
    return budget


async def invoke_tool(budget: RunBudget, name: str, arguments_text: str, policy: ToolPolicy,
                      call: Callable[[Step], Awaitable[Any]]) -> Any:
    """Run `call(step)` as the tool's step; our timeout returns a TimedOut dict, a refusal a
    `refused` dict (both for the model); anything else the tool raises is re-raised after
    being recorded, for the framework's own error handling."""
    try:
        if policy.side_effect == "write":
            intent = budget.intent(name, arguments_text)
            step = intent.attempt("tool", name, side_effect="write", cap=policy.cap,
                                  minimum=policy.minimum)
        else:
            intent = None
            step = budget.step("tool", name, side_effect=policy.side_effect, cap=policy.cap,
                               minimum=policy.minimum)
    except BudgetExhausted as error:
        return refused_result(name, error)
    try:
        async with step:
            return await step.run(call(step))
    except Exception:
        if step.outcome == "client_timeout":
            return (intent.timed_out() if intent is not None else step.timed_out()).to_dict()
        raise
