"""The budget SDK's adapters driving the real OpenAI Agents SDK and pydantic-ai against a fake
OpenAI-compatible model server and tool servers on 127.0.0.1: a tool's timeout is its
slice, our timeout reaches the model as an honest TimedOut result, the model's requests carry
the deadline, and every call is a budget step."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import duckdb
import httpx
import pytest
from budgetscope_sdk import REMAINING_HEADER, BudgetExhausted, Price, RunBudget, current_step
from budgetscope_sdk.adapters.common import ToolPolicy
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport
from openai import AsyncOpenAI
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import (
    FakeModel,
    HangingTool,
    HangState,
    ModelState,
    ScriptedTool,
    ScriptState,
    serve,
)
from tests.support.serve import start_serve, stop


def tool_results(model: ModelState) -> list[dict]:
    return [json.loads(message["content"]) for request in model.requests
            for message in request["messages"] if message.get("role") == "tool"]


def openai_client(model_url: str) -> AsyncOpenAI:
    # No retries of its own: retries are the budget's decision, recorded as steps.
    return AsyncOpenAI(base_url=f"{model_url}/v1", api_key="test-key", max_retries=0,
                       http_client=httpx.AsyncClient(transport=AsyncBudgetTransport()))


@pytest.mark.slow
def test_openai_agents_tool_timeout_is_a_timed_out_result_from_the_slice() -> None:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from budgetscope_sdk.adapters.openai_agents import budgeted_agent, run

    set_tracing_disabled(True)  # its own exporter would call api.openai.com
    spans = capture()
    keys: list[str | None] = []

    with serve(HangingTool, HangState()) as (hang_url, hang), \
            serve(FakeModel, ModelState("cancel_subscription", {"sub_id": "sub_42"})) as (
                model_url, model):

        @function_tool
        async def cancel_subscription(sub_id: str) -> str:
            """Cancel a subscription."""
            step = current_step()
            keys.append(step.idempotency_key if step else None)
            async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client:
                response = await client.post(f"{hang_url}/subscriptions/{sub_id}/cancel")
            return response.text

        agent = Agent(name="billing-agent", instructions="Cancel what you are asked to.",
                      model=OpenAIChatCompletionsModel("fake-gpt", openai_client(model_url)),
                      tools=[cancel_subscription])
        agent = budgeted_agent(agent, {"cancel_subscription": ToolPolicy("write", cap=0.3)})

        async def main() -> str:
            async with RunBudget(20, reserve=2, tracer=spans.tracer) as budget:
                result = await run(budget, agent, "cancel sub_42")
                return result.final_output

        final = asyncio.run(main())
        assert hang.client_closed.wait(10), "the abandoned tool request's connection stayed open"

    (seen,) = tool_results(model)
    assert seen["status"] == "timed_out" and seen["deadline_ms"] == 300
    assert seen["side_effect_status"] == "possible" and seen["retryable"] is True
    assert seen["idempotency_key"] == keys[0] and keys[0].startswith("cancel_subscription-")
    assert final.startswith("done: ")
    # Each model request carried what was left of its own slice.
    assert all(0 < int(headers[REMAINING_HEADER]) <= 18_000 for headers in model.headers)
    steps = [(s["budget.step.kind"], s["budget.step.name"], s["budget.outcome"])
             for s in spans.steps()]
    assert steps == [("model", "fake-gpt", "ok"), ("tool", "cancel_subscription",
                                                   "client_timeout"),
                     ("model", "fake-gpt", "ok")]
    run_span = spans.run()
    assert run_span.attributes["gen_ai.agent.name"] == "billing-agent"
    assert run_span.attributes["budget.run.outcome"] == "completed"


@pytest.mark.slow
def test_pydantic_ai_tools_and_model_run_as_budget_steps() -> None:
    from budgetscope_sdk.adapters.pydantic_ai import BudgetedModel, BudgetedToolset, run
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.toolsets import FunctionToolset

    spans = capture()
    with serve(ScriptedTool, ScriptState({"/fetch_report": [(200, 0.05)],
                                          "/slow_search": [(200, 5.0)]})) as (tools_url, _), \
            serve(FakeModel, ModelState("fetch_report", {"name": "q4"})) as (model_url, model):

        async def fetch_report(name: str) -> str:
            """Fetch a report by name."""
            async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client:
                response = await client.get(f"{tools_url}/fetch_report")
            return response.text

        chat = OpenAIChatModel("fake-gpt", provider=OpenAIProvider(
            openai_client=openai_client(model_url)))
        agent = Agent(BudgetedModel(chat), name="researcher", toolsets=[BudgetedToolset(
            FunctionToolset([fetch_report]), policies={"fetch_report": ToolPolicy(cap=2)})])

        async def main() -> str:
            async with RunBudget(20, reserve=2, tracer=spans.tracer) as budget:
                result = await run(budget, agent, "fetch the q4 report")
                return result.output

        output = asyncio.run(main())
    (seen,) = tool_results(model)
    assert seen == {"path": "/fetch_report", "turn": 1}
    assert output.startswith("done: ")
    steps = spans.steps()
    assert [(s["budget.step.kind"], s["budget.step.name"], s["budget.outcome"])
            for s in steps] == [("model", "fake-gpt", "ok"), ("tool", "fetch_report", "ok"),
                                ("model", "fake-gpt", "ok")]
    tool = steps[1]
    assert tool["budget.cap_ms"] == 2000 and tool["budget.allocated_ms"] == 2000
    assert spans.run().attributes["gen_ai.agent.name"] == "researcher"


def test_pydantic_ai_tool_refused_when_its_minimum_does_not_fit() -> None:
    from budgetscope_sdk.adapters.pydantic_ai import BudgetedModel, BudgetedToolset, run
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.toolsets import FunctionToolset

    spans = capture()
    calls: list[str] = []
    with serve(FakeModel, ModelState("crawl", {"site": "x"})) as (model_url, model):

        async def crawl(site: str) -> str:
            """Crawl a site."""
            calls.append(site)
            return "crawled"

        chat = OpenAIChatModel("fake-gpt", provider=OpenAIProvider(
            openai_client=openai_client(model_url)))
        agent = Agent(BudgetedModel(chat), toolsets=[BudgetedToolset(
            FunctionToolset([crawl]), policies={"crawl": ToolPolicy(minimum=60)})])

        async def main() -> None:
            async with RunBudget(20, reserve=2, tracer=spans.tracer) as budget:
                await run(budget, agent, "crawl x")

        asyncio.run(main())
    assert calls == []  # refused before it started
    (seen,) = tool_results(model)
    assert seen["status"] == "refused" and seen["side_effect_status"] == "none"
    outcomes = [s["budget.outcome"] for s in spans.steps()]
    assert outcomes == ["ok", "refused", "ok"]
    assert spans.run().attributes["budget.run.outcome"] == "partial"


@pytest.mark.slow
def test_openai_agents_spans_are_annotated_and_each_call_is_one_step_in_budgetscope(
        tmp_path: Path) -> None:
    """With the Agents SDK's tracing on and BudgetTracingProcessor registered, each Agents SDK
    function/model span is joined to the one budget step of its call; the spans go through the
    real OTLP exporter to `budgetscope serve`, and each call is one step there, with its slice,
    the timed-out tool a client_timeout with its allocated deadline."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Span,
        TracingProcessor,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from budgetscope_sdk.adapters.openai_agents import (
        BudgetTracingProcessor,
        budgeted_agent,
        run,
    )

    class Recorder(TracingProcessor):
        """What the Agents SDK's own tracing produced, to check the join against."""

        def __init__(self) -> None:
            self.ended: list[Span] = []

        def on_trace_start(self, trace: object) -> None: ...
        def on_trace_end(self, trace: object) -> None: ...
        def on_span_start(self, span: Span) -> None: ...
        def on_span_end(self, span: Span) -> None:
            self.ended.append(span)
        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    recorder = Recorder()
    # Only ours: the default processor would export to api.openai.com.
    set_trace_processors([BudgetTracingProcessor(), recorder])
    set_tracing_disabled(False)
    db = tmp_path / "agents.duckdb"
    process, announced = start_serve(db, "--no-ui")
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "billing"}))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=30)))
        tracer = provider.get_tracer("billing-agent")
        with serve(HangingTool, HangState()) as (hang_url, _), \
                serve(FakeModel, ModelState("cancel_subscription", {"sub_id": "sub_7"})) as (
                    model_url, _):

            @function_tool
            async def cancel_subscription(sub_id: str) -> str:
                """Cancel a subscription."""
                async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client:
                    response = await client.post(f"{hang_url}/subscriptions/{sub_id}/cancel")
                return response.text

            agent = budgeted_agent(Agent(
                name="billing-agent", instructions="Cancel what you are asked to.",
                model=OpenAIChatCompletionsModel("fake-gpt", openai_client(model_url)),
                tools=[cancel_subscription]),
                {"cancel_subscription": ToolPolicy("write", cap=0.3)}, model_cap=15)

            async def main() -> str:
                async with RunBudget(40, reserve=2, tracer=tracer) as budget:
                    await run(budget, agent, "cancel sub_7")
                return budget.trace_id

            run_id = asyncio.run(main())
        assert provider.force_flush(30_000)
        provider.shutdown()
    finally:
        set_trace_processors([])
        set_tracing_disabled(True)
        code, _, err = stop(process)
    assert code == 0, err

    joined = {span.span_id: span.span_data.type for span in recorder.ended
              if span.span_data.type in ("function", "generation")}
    assert sorted(joined.values()) == ["function", "generation", "generation"]
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT s.step_key, s.class, s.allocated_ms, s.cap_ms, s.remaining_ms,"
            " s.convention, p.attributes FROM steps s JOIN spans p"
            " ON p.trace_id = s.trace_id AND p.span_id = s.span_id"
            " WHERE s.run_id = ? ORDER BY s.start_ns", [run_id]).fetchall()
    steps = [(key, cls) for key, cls, *_ in rows]
    assert steps == [("model:fake-gpt", "ok"), ("tool:cancel_subscription", "client_timeout"),
                     ("model:fake-gpt", "ok")], [row[-1] for row in rows]
    model, tool, _ = rows
    assert tool[2] == 300 and tool[3] == 300 and 0 < tool[4] <= 40_000
    assert model[2] == 15_000 and model[3] == 15_000
    annotated = {}
    for *_, attributes in rows:
        attributes = json.loads(attributes) if isinstance(attributes, str) else attributes
        annotated[attributes["openai_agents.span_id"]] = attributes["openai_agents.span_type"]
    # Each Agents SDK call span is annotated by exactly one budget step, and vice versa.
    assert annotated == joined


# -- money and tokens ----------------------------------------------------------------------------
PRICES = {"fake-gpt": {"input": "2.5", "output": "10"}}


def plain_openai_client(model_url: str) -> AsyncOpenAI:
    """No budget transport: the usage can only come from the framework's own response."""
    return AsyncOpenAI(base_url=f"{model_url}/v1", api_key="test-key", max_retries=0)


@pytest.mark.parametrize("transport", [True, False])
def test_pydantic_ai_model_calls_are_allocated_held_and_record_their_usage(
        transport: bool) -> None:
    from budgetscope_sdk.adapters.pydantic_ai import BudgetedModel, run
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.settings import ModelSettings

    spans = capture()
    usage = [{"input": 1000, "cache_read": 400, "output": 900}]
    with serve(FakeModel, ModelState(None, answer="the answer", usage=usage,
                                     prices=PRICES)) as (model_url, model):
        client = openai_client(model_url) if transport else plain_openai_client(model_url)
        chat = OpenAIChatModel("fake-gpt", provider=OpenAIProvider(openai_client=client))
        agent = Agent(BudgetedModel(chat, max_output_tokens=2000, price=Price(input=2.5,
                                                                              output=10)))

        async def main() -> str:
            async with RunBudget(20, usd=0.02, tracer=spans.tracer) as budget:
                result = await run(budget, agent, "answer",
                                   model_settings=ModelSettings(max_tokens=4000))
                return result.output

        assert asyncio.run(main()) == "the answer"
    # $0.02 affords 2,000 output tokens at $10 per million (no input estimate yet): the
    # framework's max_tokens setting was lowered to the allocation (pydantic-ai sends it as
    # max_completion_tokens), and the model stopped there.
    assert model.requests[0]["max_completion_tokens"] == 2000
    (step,) = spans.steps()
    assert step["budget.allocated_tokens"] == 2000
    (bill,) = model.billed
    assert (step["gen_ai.usage.input_tokens"], step["gen_ai.usage.output_tokens"],
            step["gen_ai.usage.cache_read.input_tokens"]) == (1000, 900, 400)
    assert round(step["budget.cost_usd"] * 1e9) == bill["cost_nano"]


@pytest.mark.parametrize("transport", [True, False])
def test_openai_agents_model_calls_are_allocated_and_record_their_usage(transport: bool) -> None:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, set_tracing_disabled
    from budgetscope_sdk.adapters.openai_agents import budgeted_agent, run

    set_tracing_disabled(True)
    spans = capture()
    usage = [{"input": 1500, "cache_read": 500, "output": 700, "reasoning": 70}]
    with serve(FakeModel, ModelState(None, answer="the answer", usage=usage,
                                     prices=PRICES)) as (model_url, model):
        client = openai_client(model_url) if transport else plain_openai_client(model_url)
        agent = budgeted_agent(Agent(
            name="writer", model=OpenAIChatCompletionsModel("fake-gpt", client),
            model_settings=ModelSettings(max_tokens=8000)),
            max_output_tokens=4000, price=Price(input=2.5, output=10))

        async def main() -> str:
            async with RunBudget(20, usd=0.03, tracer=spans.tracer) as budget:
                return (await run(budget, agent, "write")).final_output

        assert asyncio.run(main()) == "the answer"
    assert model.requests[0]["max_tokens"] == 3000  # $0.03 at $10 per million output tokens
    (step,) = spans.steps()
    (bill,) = model.billed
    assert (step["budget.allocated_tokens"], step["gen_ai.usage.input_tokens"],
            step["gen_ai.usage.output_tokens"], step["gen_ai.usage.cache_read.input_tokens"],
            step["gen_ai.usage.reasoning.output_tokens"]) == (3000, 1500, 700, 500, 70)
    assert round(step["budget.cost_usd"] * 1e9) == bill["cost_nano"]


def test_a_model_call_the_money_cannot_cover_is_refused_and_never_sent() -> None:
    from budgetscope_sdk.adapters.pydantic_ai import BudgetedModel, run
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    spans = capture()
    with serve(FakeModel, ModelState(None)) as (model_url, model):
        chat = OpenAIChatModel("fake-gpt", provider=OpenAIProvider(
            openai_client=openai_client(model_url)))
        agent = Agent(BudgetedModel(chat, price=Price(input=2.5, output=10)))

        async def main() -> None:
            async with RunBudget(20, usd=0.001, tracer=spans.tracer) as budget:
                await run(budget, agent, "answer")

        with pytest.raises(BudgetExhausted, match="refused model:fake-gpt"):
            asyncio.run(main())
    assert model.requests == []  # refused before anything was sent
    (step,) = spans.steps()
    assert (step["budget.outcome"], step["budget.refused_by"]) == ("refused", "usd")
    run_span = spans.run().attributes
    assert (run_span["budget.run.outcome"], run_span["budget.run.exhausted_by"]) == (
        "exhausted", "usd")


@pytest.mark.parametrize("transport", [True, False])
def test_openai_agents_streamed_model_calls_record_their_usage(transport: bool) -> None:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        set_tracing_disabled,
    )
    from budgetscope_sdk.adapters.openai_agents import budgeted_agent

    set_tracing_disabled(True)
    spans = capture()
    usage = [{"input": 800, "cache_read": 300, "output": 120}]
    # Without the budget transport, the stream carries usage only when the agent asks for it.
    settings = ModelSettings() if transport else ModelSettings(include_usage=True)
    with serve(FakeModel, ModelState(None, answer="streamed", usage=usage,
                                     prices=PRICES)) as (model_url, model):
        client = openai_client(model_url) if transport else plain_openai_client(model_url)
        agent = budgeted_agent(Agent(name="writer", model=OpenAIChatCompletionsModel(
            "fake-gpt", client), model_settings=settings), max_output_tokens=500,
            price=Price(input=2.5, output=10))

        async def main() -> str:
            async with RunBudget(20, usd=1, tracer=spans.tracer):
                result = Runner.run_streamed(agent, "write")
                async for _ in result.stream_events():
                    pass
                return str(result.final_output)

        assert asyncio.run(main()) == "streamed"
    request = model.requests[0]
    assert request["stream"] is True and request["stream_options"]["include_usage"] is True
    assert request["max_tokens"] == 500
    (step,) = spans.steps()
    (bill,) = model.billed
    assert (step["gen_ai.usage.input_tokens"], step["gen_ai.usage.output_tokens"],
            step["gen_ai.usage.cache_read.input_tokens"]) == (800, 120, 300)
    assert round(step["budget.cost_usd"] * 1e9) == bill["cost_nano"]
