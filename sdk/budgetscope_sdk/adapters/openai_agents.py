"""The OpenAI Agents SDK (`openai-agents`) under a RunBudget.

    agent = budgeted_agent(agent, policies={"cancel_subscription": ToolPolicy("write", cap=5)})
    async with RunBudget(60, agent=agent.name) as budget:
        result = await run(budget, agent, "cancel sub_42")

- each function tool's timeout is its slice of the run (min(cap, remaining − reserve)), taken
  when the model calls it; our timeout comes back to the model as a TimedOut result, a refused
  call as a `refused` result, both as JSON text;
- each model call is a `model` step bounded by its slice (give the model's AsyncOpenAI client
  an httpx client with AsyncBudgetTransport, and max_retries=0, and its requests carry the
  slice as timeout and deadline headers too); in a run with a dollar or token budget its
  output is allocated (`BudgetedModel(..., max_output_tokens=, price=)`, the model settings'
  `max_tokens` lowered to it), it is refused (BudgetExhausted) when not even its minimum fits,
  and its usage is recorded from the response (unless the transport already read it);
- the whole Runner.run is bounded by the run's deadline.
The steps and the run are OpenTelemetry spans annotated with budget.* and gen_ai.* attributes.

The Agents SDK's own tracing spans (`agents.tracing`) and the budget steps are the same calls:
each budget step IS the annotated span of its call, so budgetscope counts it once. Register
`BudgetTracingProcessor` (`add_trace_processor(BudgetTracingProcessor())`) and each step of a
function tool or a model call carries the ids of the Agents SDK span it covers
(`openai_agents.trace_id`, `openai_agents.span_id`, `openai_agents.span_type`) and what that
span learnt (a generation's token usage, when the step has none yet), beside its budget.*
attributes. The Agents SDK's
span data types are slotted and export a fixed dict, so the budget attributes cannot be written
into them; the join goes the other way. No second step span is opened for the call."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agents import Agent, FunctionTool, Model, ModelSettings, Runner
from agents.tracing import (
    GenerationSpanData,
    ResponseSpanData,
    Span,
    Trace,
    TracingProcessor,
    get_current_span,
)
from agents.tracing.spans import NoOpSpan

from budgetscope_sdk import attributes as attr
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
from budgetscope_sdk.step import Step, current_step

_MODEL_SPAN_DATA = (GenerationSpanData, ResponseSpanData)


def link_agents_span(step: Step, span: Span[Any] | None) -> None:
    """Mark `step` as the budget annotation of the Agents SDK span `span` (the same call)."""
    if span is None or isinstance(span, NoOpSpan):
        return  # tracing disabled: NoOpSpan has no identity to join on
    step.span.set_attributes({attr.AGENTS_TRACE_ID: span.trace_id,
                              attr.AGENTS_SPAN_ID: span.span_id,
                              attr.AGENTS_SPAN_TYPE: span.span_data.type})


class BudgetTracingProcessor(TracingProcessor):
    """Joins the Agents SDK's model spans (generation/response) to the `model` step open around
    them, and copies a generation's token usage onto that step when it ends. Function spans are
    joined by the budgeted tool itself: they start before the tool's step does."""

    def __init__(self) -> None:
        self._steps: dict[str, Step] = {}

    def on_trace_start(self, trace: Trace) -> None:
        return None

    def on_trace_end(self, trace: Trace) -> None:
        return None

    def on_span_start(self, span: Span[Any]) -> None:
        if not isinstance(span.span_data, _MODEL_SPAN_DATA):
            return
        step = current_step()
        # Only a model call's own step: an Agents SDK model span outside the adapter (an
        # unbudgeted model) stays unjoined rather than annotated with someone else's budget.
        if step is None or step.kind != "model" or step.outcome is not None:
            return
        link_agents_span(step, span)
        self._steps[span.span_id] = step

    def on_span_end(self, span: Span[Any]) -> None:
        step = self._steps.pop(span.span_id, None)
        if step is None or step.outcome is not None:
            return  # the step already ended (our timeout): its span is closed
        usage = getattr(span.span_data, "usage", None)
        if step.usage is None and isinstance(usage, Mapping) and usage.get("requests") != 0:
            record_openai_usage(step, usage)

    def shutdown(self) -> None:
        self._steps.clear()

    def force_flush(self) -> None:
        return None


def _field(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def record_openai_usage(step: Step, usage: Any) -> None:
    """Record the Agents SDK's usage (its Usage, a Responses API usage, or a span's dict):
    input_tokens (cached included), output_tokens, input_tokens_details.cached_tokens,
    output_tokens_details.reasoning_tokens. Invalid values are dropped by record_usage."""
    step.record_usage(
        input_tokens=_field(usage, "input_tokens"), output_tokens=_field(usage, "output_tokens"),
        cache_read=_field(_field(usage, "input_tokens_details"), "cached_tokens"),
        reasoning=_field(_field(usage, "output_tokens_details"), "reasoning_tokens"))


def _with_ceiling(args: tuple[Any, ...], kwargs: dict[str, Any], ceiling: int | None
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with its model settings' max_tokens lowered to `ceiling`."""
    settings = kwargs.get("model_settings", args[2] if len(args) > 2 else None)
    if ceiling is None or not isinstance(settings, ModelSettings) or (
            settings.max_tokens is not None and settings.max_tokens <= ceiling):
        return args, kwargs
    fitted = dataclasses.replace(settings, max_tokens=ceiling)
    if "model_settings" in kwargs:
        return args, {**kwargs, "model_settings": fitted}
    return (*args[:2], fitted, *args[3:]), kwargs


def budgeted_tool(tool: FunctionTool, policy: ToolPolicy | None = None) -> FunctionTool:
    """A copy of `tool` whose every call is a budget step."""
    original = tool.on_invoke_tool
    chosen = policy or ToolPolicy()

    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        budget = require_budget("OpenAI Agents SDK")
        function_span = get_current_span()  # the Agents SDK's span of this very call

        async def call(step: Step) -> Any:
            link_agents_span(step, function_span)
            result = await original(context, arguments)
            # function_tool turns what the tool raised into text for the model, so our
            # transport's timeout (set to the slice) can come back as a plain result: a result
            # that arrives after the slice is late, whatever it says.
            step.check()
            return result

        result = await invoke_tool(budget, tool.name, arguments, chosen, call)
        return json.dumps(result, sort_keys=True) if isinstance(result, dict) else result

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


class BudgetedModel(Model):
    """A model whose every call is a `model` step bounded by its slice, and in a run with a
    dollar or token budget, by its allocation: `max_output_tokens` (else the model settings'
    `max_tokens`), `price` (USD per million tokens, for the hold and the cost),
    `estimate_usd`, `minimum_output_tokens` as `budget.step` takes them."""

    def __init__(self, model: Model, name: str | None = None, cap: Duration | None = None,
                 minimum: Duration = 0.0, *, max_output_tokens: int | None = None,
                 price: Price | None = None, estimate_usd: float | None = None,
                 minimum_output_tokens: int = DEFAULT_MINIMUM_OUTPUT_TOKENS) -> None:
        self.wrapped = model
        self.name = name or str(getattr(model, "model", type(model).__name__))
        self.cap = cap
        self.minimum = minimum
        self.max_output_tokens = max_output_tokens
        self.price = price
        self.estimate_usd = estimate_usd
        self.minimum_output_tokens = minimum_output_tokens

    def _step(self, budget: RunBudget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Step:
        settings = kwargs.get("model_settings", args[2] if len(args) > 2 else None)
        asked = settings.max_tokens if isinstance(settings, ModelSettings) else None
        return budget.step("model", self.name, cap=self.cap, minimum=self.minimum,
                           max_output_tokens=least(self.max_output_tokens, asked),
                           price=self.price,
                           estimate_usd=self.estimate_usd,
                           minimum_output_tokens=self.minimum_output_tokens)

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        budget = require_budget("OpenAI Agents SDK")
        async with self._step(budget, args, kwargs) as step:
            args, kwargs = _with_ceiling(args, kwargs, step.max_tokens)
            response = await step.run(self.wrapped.get_response(*args, **kwargs))
            usage = getattr(response, "usage", None)
            if step.usage is None and usage is not None and getattr(usage, "requests",
                                                                    None) != 0:
                record_openai_usage(step, usage)
            return response

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        budget = require_budget("OpenAI Agents SDK")
        async with self._step(budget, args, kwargs) as step:
            args, kwargs = _with_ceiling(args, kwargs, step.max_tokens)
            async for event in self.wrapped.stream_response(*args, **kwargs):
                step.check()  # a stream that keeps talking past its slice is still late
                if getattr(event, "type", None) == "response.completed" and step.usage is None:
                    usage = getattr(getattr(event, "response", None), "usage", None)
                    if usage is not None:
                        record_openai_usage(step, usage)
                yield event


def budgeted_agent(agent: Agent[Any], policies: Mapping[str, ToolPolicy] | None = None,
                   model_cap: Duration | None = None, **model_options: Any) -> Agent[Any]:
    """A clone of `agent` with its function tools and its model under the current budget;
    `model_options` (max_output_tokens, price, estimate_usd, minimum_output_tokens) go to its
    BudgetedModel."""
    tools = [budgeted_tool(tool, policy_for(policies, tool.name))
             if isinstance(tool, FunctionTool) else tool for tool in agent.tools]
    if not isinstance(agent.model, Model):
        raise TypeError("give the agent a Model instance (e.g. OpenAIChatCompletionsModel) so "
                        "its calls can be budgeted; a model name is resolved too late")
    model = agent.model if isinstance(agent.model, BudgetedModel) else BudgetedModel(
        agent.model, cap=model_cap, **model_options)
    return agent.clone(tools=tools, model=model)


async def run(budget: RunBudget, agent: Agent[Any], input: Any, **options: Any) -> Any:
    """Runner.run(agent, input, **options), bounded by the run's deadline; the run span is
    annotated with the agent's name."""
    budget.span.set_attribute("gen_ai.agent.name", agent.name)
    return await budget.bound(Runner.run(agent, input, **options))
