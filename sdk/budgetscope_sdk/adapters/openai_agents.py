"""The OpenAI Agents SDK (`openai-agents`) under a RunBudget.

    agent = budgeted_agent(agent, policies={"cancel_subscription": ToolPolicy("write", cap=5)})
    async with RunBudget(60, agent=agent.name) as budget:
        result = await run(budget, agent, "cancel sub_42")

- each function tool's timeout is its slice of the run (min(cap, remaining − reserve)), taken
  when the model calls it; our timeout comes back to the model as a TimedOut result, a refused
  call as a `refused` result, both as JSON text;
- each model call is a `model` step bounded by its slice (give the model's AsyncOpenAI client
  an httpx client with AsyncBudgetTransport, and max_retries=0, and its requests carry the
  slice as timeout and deadline headers too);
- the whole Runner.run is bounded by the run's deadline.
The steps and the run are OpenTelemetry spans annotated with budget.* and gen_ai.* attributes
(the Agents SDK's own tracing is separate and untouched)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agents import Agent, FunctionTool, Model, Runner

from budgetscope_sdk.adapters.common import (
    ToolPolicy,
    invoke_tool,
    policy_for,
    require_budget,
)
from budgetscope_sdk.budget import Duration, RunBudget


def budgeted_tool(tool: FunctionTool, policy: ToolPolicy | None = None) -> FunctionTool:
    """A copy of `tool` whose every call is a budget step."""
    original = tool.on_invoke_tool
    chosen = policy or ToolPolicy()

    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        budget = require_budget("OpenAI Agents SDK")
        result = await invoke_tool(budget, tool.name, arguments, chosen,
                                   lambda step: original(context, arguments))
        return json.dumps(result, sort_keys=True) if isinstance(result, dict) else result

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


class BudgetedModel(Model):
    """A model whose every call is a `model` step bounded by its slice."""

    def __init__(self, model: Model, name: str | None = None, cap: Duration | None = None,
                 minimum: Duration = 0.0) -> None:
        self.wrapped = model
        self.name = name or str(getattr(model, "model", type(model).__name__))
        self.cap = cap
        self.minimum = minimum

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        budget = require_budget("OpenAI Agents SDK")
        async with budget.step("model", self.name, cap=self.cap, minimum=self.minimum) as step:
            return await step.run(self.wrapped.get_response(*args, **kwargs))

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        budget = require_budget("OpenAI Agents SDK")
        async with budget.step("model", self.name, cap=self.cap, minimum=self.minimum) as step:
            async for event in self.wrapped.stream_response(*args, **kwargs):
                step.check()  # a stream that keeps talking past its slice is still late
                yield event


def budgeted_agent(agent: Agent[Any], policies: Mapping[str, ToolPolicy] | None = None,
                   model_cap: Duration | None = None) -> Agent[Any]:
    """A clone of `agent` with its function tools and its model under the current budget."""
    tools = [budgeted_tool(tool, policy_for(policies, tool.name))
             if isinstance(tool, FunctionTool) else tool for tool in agent.tools]
    if not isinstance(agent.model, Model):
        raise TypeError("give the agent a Model instance (e.g. OpenAIChatCompletionsModel) so "
                        "its calls can be budgeted; a model name is resolved too late")
    model = agent.model if isinstance(agent.model, BudgetedModel) else BudgetedModel(
        agent.model, cap=model_cap)
    return agent.clone(tools=tools, model=model)


async def run(budget: RunBudget, agent: Agent[Any], input: Any, **options: Any) -> Any:
    """Runner.run(agent, input, **options), bounded by the run's deadline; the run span is
    annotated with the agent's name."""
    budget.span.set_attribute("gen_ai.agent.name", agent.name)
    return await budget.bound(Runner.run(agent, input, **options))
