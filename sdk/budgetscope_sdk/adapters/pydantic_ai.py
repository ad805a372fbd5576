"""pydantic-ai under a RunBudget.

    agent = Agent(BudgetedModel(model), toolsets=[BudgetedToolset(FunctionToolset([fetch]),
                                                  policies={"fetch": ToolPolicy(cap=9)})])
    async with RunBudget(60, agent="researcher") as budget:
        result = await run(budget, agent, "summarise the report")

Tool calls are `tool` steps whose timeout is their slice (our timeout is returned to the model
as a TimedOut result, a refusal as a `refused` result); model requests are `model` steps bounded
by theirs and, in a run with a dollar or token budget, by their allocation (the request's
`max_tokens` setting lowered to it; refused with BudgetExhausted when not even the minimum
fits), their usage recorded from the response unless the transport already read it; the agent
run is bounded by the deadline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import KnownModelName, Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import WrapperToolset

from budgetscope_sdk.adapters.common import (
    ToolPolicy,
    invoke_tool,
    least,
    policy_for,
    require_budget,
)
from budgetscope_sdk.budget import Duration, RunBudget
from budgetscope_sdk.ledger import DEFAULT_MINIMUM_OUTPUT_TOKENS
from budgetscope_sdk.price import Price
from budgetscope_sdk.step import Step


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
    """Every model request is a `model` step bounded by its slice, and in a run with a dollar
    or token budget, by its allocation: `max_output_tokens` (else the request's `max_tokens`
    setting), `price` (USD per million tokens), `estimate_usd`, `minimum_output_tokens` as
    `budget.step` takes them."""

    def __init__(self, wrapped: Model | KnownModelName, cap: Duration | None = None,
                 minimum: Duration = 0.0, *, max_output_tokens: int | None = None,
                 price: Price | None = None, estimate_usd: float | None = None,
                 minimum_output_tokens: int = DEFAULT_MINIMUM_OUTPUT_TOKENS) -> None:
        super().__init__(wrapped)
        self.cap = cap
        self.minimum = minimum
        self.max_output_tokens = max_output_tokens
        self.price = price
        self.estimate_usd = estimate_usd
        self.minimum_output_tokens = minimum_output_tokens

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        budget = require_budget("pydantic-ai")
        settings: ModelSettings = {**(model_settings or {})}
        asked = settings.get("max_tokens")
        async with budget.step("model", self.model_name, cap=self.cap, minimum=self.minimum,
                               max_output_tokens=least(self.max_output_tokens, asked
                                                       if isinstance(asked, int) else None),
                               price=self.price, estimate_usd=self.estimate_usd,
                               minimum_output_tokens=self.minimum_output_tokens) as step:
            if step.max_tokens is not None and not (isinstance(asked, int)
                                                    and asked <= step.max_tokens):
                settings["max_tokens"] = step.max_tokens
            response = await step.run(self.wrapped.request(
                messages, settings or model_settings, model_request_parameters))
            if step.usage is None:
                _record(step, getattr(response, "usage", None))
            return response


def _record(step: Step, usage: Any) -> None:
    """pydantic-ai's RequestUsage: input_tokens (cache included), cache_read_tokens,
    cache_write_tokens, output_tokens, details['reasoning_tokens']. An all-zero usage is a
    response that reported none."""
    if usage is None or not (getattr(usage, "input_tokens", 0)
                             or getattr(usage, "output_tokens", 0)):
        return
    details = getattr(usage, "details", None)
    step.record_usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      cache_read=getattr(usage, "cache_read_tokens", None),
                      cache_write=getattr(usage, "cache_write_tokens", None),
                      reasoning=details.get("reasoning_tokens")
                      if isinstance(details, dict) else None)


async def run(budget: RunBudget, agent: Agent[Any, Any], prompt: Any, **options: Any) -> Any:
    """agent.run(prompt, **options), bounded by the run's deadline."""
    if agent.name:
        budget.span.set_attribute("gen_ai.agent.name", agent.name)
    return await budget.bound(agent.run(prompt, **options))
