"""pydantic-ai under a RunBudget.

    agent = Agent(BudgetedModel(model), toolsets=[BudgetedToolset(FunctionToolset([fetch]),
                                                  policies={"fetch": ToolPolicy(cap=9)})])
    async with RunBudget(60, agent="researcher") as budget:
        result = await run(budget, agent, "summarise the report")

Tool calls are `tool` steps whose timeout is their slice (our timeout is returned to the model
as a TimedOut result, a refusal as a `refused` result); model requests are `model` steps bounded
by theirs; the agent run is bounded by the deadline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.toolsets import WrapperToolset

from budgetscope_sdk.adapters.common import (
    ToolPolicy,
    invoke_tool,
    policy_for,
    require_budget,
)
from budgetscope_sdk.budget import Duration, RunBudget


@dataclass
class BudgetedToolset(WrapperToolset[Any]):
    """Every tool of the wrapped toolset runs as a budget step."""

    policies: Mapping[str, ToolPolicy] = field(default_factory=dict)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        budget = require_budget("pydantic-ai")
        arguments = json.dumps(tool_args, sort_keys=True, default=str)
        return await invoke_tool(budget, name, arguments, policy_for(self.policies, name),
                                 lambda step: self.wrapped.call_tool(name, tool_args, ctx, tool))


class BudgetedModel(WrapperModel):
    """Every model request is a `model` step bounded by its slice."""

    def __init__(self, wrapped: Model | KnownModelName, cap: Duration | None = None,
                 minimum: Duration = 0.0) -> None:
        super().__init__(wrapped)
        self.cap = cap
        self.minimum = minimum

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        budget = require_budget("pydantic-ai")
        async with budget.step("model", self.model_name, cap=self.cap,
                               minimum=self.minimum) as step:
            return await step.run(self.wrapped.request(*args, **kwargs))


async def run(budget: RunBudget, agent: Agent[Any, Any], prompt: Any, **options: Any) -> Any:
    """agent.run(prompt, **options), bounded by the run's deadline."""
    if agent.name:
        budget.span.set_attribute("gen_ai.agent.name", agent.name)
    return await budget.bound(agent.run(prompt, **options))
