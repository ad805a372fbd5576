"""End to end, money: research agents on the budget SDK against fake model servers on 127.0.0.1
(OpenAI-compatible chat completions as JSON, Anthropic Messages streamed) that measure what they
are sent, bill it at known prices and log the bill; the spans go through the real OTLP exporter
to a real `budgetscope serve`.

Judged against the servers' own log, never against the SDK's ledger: refused calls never reached
a server; no run spent more than its dollar budget by more than one call's estimate error; each
step's usage and cost are the bill's; and, with the fake models' prices declared with
`budgetscope prices set`, `budgetscope report cost` gives each run the tokens of the log exactly
and its cost to the nano-dollar (the columns of docs/metrics.md §11.9)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from budgetscope_sdk import BudgetExhausted, Price, RunBudget, Step
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from tests.sdk.support.servers import FakeModel, ModelState, serve
from tests.support.serve import CLI, start_serve, stop

pytestmark = pytest.mark.slow

# USD per million tokens, as the fake servers bill and as `budgetscope prices set` declares.
RATES = {
    "fake-gpt": {"input": "2.5", "output": "10", "cache_read": "1.25"},
    "fake-claude": {"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75"},
}
PRICES = {model: Price(**{name: float(rate) for name, rate in rates.items()})
          for model, rates in RATES.items()}
SOURCE = "x" * 2000  # what each answer adds to the conversation: 500 tokens as the fakes count


def measured(wanted_output: int, cache: bool) -> Any:
    """How a fake counts a request: a token per 4 characters of its messages and 50 of overhead
    (its own tokenizer, which the agent does not have); an answer of `wanted_output` tokens, cut
    at the max_tokens asked. With `cache`, 60% of the input read from the cache, 20% written."""
    def usage(body: dict[str, Any]) -> dict[str, Any]:
        chars = sum(len(m["content"]) for m in body.get("messages", [])
                    if isinstance(m.get("content"), str))
        tokens = chars // 4 + 50
        entry = {"input": tokens, "output": wanted_output}
        if cache:
            entry.update(cache_read=tokens * 6 // 10, cache_write=tokens * 2 // 10)
        return entry
    return usage


@dataclass
class Call:
    """An admitted call as the agent saw it: its id (the X-Call header the server bills it
    under), its allocation and what it held."""

    run: str
    id: str
    allocated: int | None
    held_nano: int


@dataclass
class Truth:
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # label → what the agent knew
    calls: list[Call] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)


def admitted(truth: Truth, label: str, call: Step) -> str:
    number = sum(1 for known in truth.calls if known.run == label) + 1
    truth.calls.append(Call(label, f"{label}-{number}", call.max_tokens,
                            round(call.held_usd * 1e9)))
    return f"{label}-{number}"


async def ask(client: httpx.AsyncClient, url: str, api: str, model: str, call_id: str,
              prompt: str) -> str:
    """One model call as an agent makes it: it asks for up to 1,200 output tokens and lets the
    transport lower that to the step's allocation."""
    messages = [{"role": "user", "content": prompt}]
    headers = {"X-Call": call_id}
    if api == "anthropic":
        body = {"model": model, "max_tokens": 1200, "messages": messages, "stream": True}
        text = ""
        async with client.stream("POST", f"{url}/v1/messages", json=body,
                                 headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and '"text_delta"' in line:
                    text += json.loads(line[5:])["delta"]["text"]
        return text
    response = await client.post(f"{url}/v1/chat/completions", headers=headers, json={
        "model": model, "max_tokens": 1200, "messages": messages})
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


async def research(tracer: Tracer, truth: Truth, label: str, url: str, api: str, model: str,
                   width: int, priced: bool, **budget: Any) -> None:
    """Rounds of `width` parallel calls on a growing conversation until a call is refused,
    then a landing call that may spend the reserve; labelled partial."""
    price = PRICES[model] if priced else None
    notes = [f"research question for {label}"]
    async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
            RunBudget(60, agent=label, tracer=tracer, **budget) as run:
        truth.runs[label] = {"run_id": run.trace_id, **budget}
        refused = False
        while not refused:
            calls: list[Step] = []
            for _ in range(width):
                try:
                    calls.append(run.step("model", model, max_output_tokens=1200,
                                          price=price))
                except BudgetExhausted as error:
                    truth.refused[label] += 1
                    truth.runs[label]["refused_by"] = error.refused_by
                    refused = True
                    break

            async def one(call: Step, prompt: str) -> str:
                call_id = admitted(truth, label, call)
                async with call:
                    return await ask(client, url, api, model, call_id, prompt)

            prompt = "\n".join(notes)
            answers = await asyncio.gather(*(one(call, prompt) for call in calls))
            notes += [f"{answer}\n{SOURCE}" for answer in answers]
        try:
            landing = run.step("model", model, max_output_tokens=600, price=price, landing=True)
        except BudgetExhausted:
            truth.refused[label] += 1
        else:
            call_id = admitted(truth, label, landing)
            async with landing:
                await ask(client, url, api, model, call_id, "\n".join(notes))
        run.finish("what was found", missing=["further rounds"])
    truth.runs[label]["outcome"] = run.outcome


async def flaky(tracer: Tracer, truth: Truth, url: str) -> None:
    """Three calls in a row: a 503 without usage, a 500 that reports usage, a 200."""
    label = "flaky"
    async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
            RunBudget(60, agent=label, tracer=tracer, usd=0.05) as run:
        truth.runs[label] = {"run_id": run.trace_id, "usd": 0.05}
        for _ in range(3):
            call = run.step("model", "fake-gpt", max_output_tokens=500,
                            price=PRICES["fake-gpt"])
            call_id = admitted(truth, label, call)
            # a failure handled here is still recorded by the step as an upstream error
            async with call:
                with contextlib.suppress(httpx.HTTPStatusError):
                    await ask(client, url, "openai", "fake-gpt", call_id, "hello")
    truth.runs[label]["outcome"] = run.outcome


@dataclass
class Scenario:
    db: Path
    truth: Truth
    servers: dict[str, ModelState]
    spans: list[dict[str, Any]]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    db = tmp_path_factory.mktemp("money") / "money.duckdb"
    truth = Truth()
    states = {
        "gpt": ModelState(None, answer="found", usage=measured(900, cache=False),
                          prices=RATES),
        "claude": ModelState(None, answer="found", usage=measured(800, cache=True),
                             prices=RATES),
        "tokens": ModelState(None, answer="found", usage=measured(900, cache=False),
                             prices=RATES),
        "broke": ModelState(None, prices=RATES),
        "flaky": ModelState(None, prices=RATES, usage=[
            {"status": 503}, {"status": 500, "usage_on_error": True, "input": 1100,
                              "cache_read": 100, "output": 0},
            {"input": 1200, "output": 300}]),
    }
    captured = InMemorySpanExporter()
    process, announced = start_serve(db, "--no-ui")
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "researchers"}))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=30)))
        provider.add_span_processor(SimpleSpanProcessor(captured))
        tracer = provider.get_tracer("researchers")
        with ExitStack() as stack:
            urls = {name: stack.enter_context(serve(FakeModel, state))[0]
                    for name, state in states.items()}

            async def main() -> None:
                await asyncio.gather(
                    research(tracer, truth, "gpt", urls["gpt"], "openai", "fake-gpt", 3, True,
                             usd=0.10, reserve_usd=0.01),
                    research(tracer, truth, "claude", urls["claude"], "anthropic",
                             "fake-claude", 2, True, usd=0.08, reserve_usd=0.015),
                    research(tracer, truth, "tokens", urls["tokens"], "openai", "fake-gpt", 2,
                             False, tokens=12_000),
                    research(tracer, truth, "broke", urls["broke"], "openai", "fake-gpt", 3,
                             True, usd=0),
                    flaky(tracer, truth, urls["flaky"]))

            asyncio.run(main())
        assert provider.force_flush(30_000)
        provider.shutdown()
    finally:
        code, _, err = stop(process)
    assert code == 0, err
    spans = [dict(span.attributes or {}, trace_id=format(span.context.trace_id, "032x"))
             for span in captured.get_finished_spans()]
    yield Scenario(db, truth, states, spans)


def billed_nano(state: ModelState) -> int:
    return sum(bill["cost_nano"] for bill in state.billed)


def test_spans_match_the_bills_and_no_run_overshoots_beyond_one_estimate(
        scenario: Scenario) -> None:
    truth, servers = scenario.truth, scenario.servers
    run_of = {run["run_id"]: label for label, run in truth.runs.items()}
    steps: dict[str, list[dict[str, Any]]] = {label: [] for label in truth.runs}
    for span in scenario.spans:
        if span.get("budget.step.kind") == "model":
            steps[run_of[span["trace_id"]]].append(span)
    for label, state in servers.items():
        admitted = [s for s in steps[label] if s.get("budget.outcome") != "refused"]
        refused = [s for s in steps[label] if s.get("budget.outcome") == "refused"]
        # every admitted call reached its server, and no refused one did
        assert len(state.requests) == len(admitted), label
        assert len(refused) == truth.refused[label], label
        # each step's usage and cost are a bill of its server's (parallel: as multisets)
        recorded = Counter((s.get("gen_ai.usage.input_tokens"),
                            s.get("gen_ai.usage.output_tokens"),
                            s.get("gen_ai.usage.cache_read.input_tokens", 0),
                            s.get("gen_ai.usage.cache_write.input_tokens", 0),
                            round(s["budget.cost_usd"] * 1e9) if "budget.cost_usd" in s
                            else None)
                           for s in admitted if "gen_ai.usage.input_tokens" in s)
        priced = label != "tokens"  # the token run's steps carry no price: cost unknown
        bills = Counter((b["input"], b["output"], b["cache_read"], b["cache_write"],
                         b["cost_nano"] if priced else None) for b in state.billed)
        assert recorded == bills, label
        # each request asked for 1,200 output tokens: the transport lowered it to the step's
        # allocation (never above the step's max_output_tokens)
        allocations = sorted(call.allocated or 0 for call in truth.calls if call.run == label)
        assert sorted(request["max_tokens"] for request in state.requests) == allocations, label

    assert truth.refused["gpt"] >= 1 and truth.refused["claude"] >= 1
    assert truth.runs["gpt"]["refused_by"] == truth.runs["claude"]["refused_by"] == "usd"
    assert truth.runs["tokens"]["refused_by"] == "tokens"
    assert servers["broke"].requests == []  # usd=0: nothing was ever sent
    # No run spent more than its dollar budget by more than one call's estimate error: the
    # most that any single call was billed beyond what it held.
    for label in ("gpt", "claude", "flaky", "broke"):
        state = servers[label]
        held = {call.id: call.held_nano for call in truth.calls if call.run == label}
        worst_error = max([0] + [bill["cost_nano"] - held[bill["call"]]
                                 for bill in state.billed])
        assert billed_nano(state) <= round(truth.runs[label]["usd"] * 1e9) + worst_error, label
    tokens_run = servers["tokens"]
    assert sum(b["input"] + b["output"] for b in tokens_run.billed) <= 12_000
    runs = {run_of[s["trace_id"]]: s for s in scenario.spans if "budget.total_ms" in s}
    assert (runs["gpt"]["budget.run.outcome"], runs["gpt"]["budget.run.exhausted_by"]) == (
        "partial", "usd")
    assert runs["tokens"]["budget.run.exhausted_by"] == "tokens"
    assert runs["broke"]["budget.run.exhausted_by"] == "usd"
    assert runs["flaky"]["budget.run.outcome"] == "completed"
    assert (runs["gpt"]["budget.total_usd"], runs["tokens"]["budget.total_tokens"]) == (
        0.10, 12_000)


def cli(db: Path, *args: str) -> str:
    done = subprocess.run([*CLI, "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def nano(value: Any) -> int:
    return int(Decimal(str(value)) * 10**9)


def test_report_cost_equals_the_fake_servers_bills(scenario: Scenario) -> None:
    """Needs `budgetscope prices set` and `report cost` (the cost branches of issue 43)."""
    for model, rates in RATES.items():
        flags = [f"--{name.replace('_', '-')}" if i % 2 == 0 else value
                 for name, value in rates.items() for i in (0, 1)]
        cli(scenario.db, "prices", "set", model, *flags)
    rows = {row["run_id"]: row for row in json.loads(
        cli(scenario.db, "report", "cost", "--format", "json"))}
    truth = scenario.truth
    assert set(rows) == {run["run_id"] for run in truth.runs.values()}
    for label, state in scenario.servers.items():
        row = rows[truth.runs[label]["run_id"]]
        bills = state.billed
        assert (int(row["input_tokens"]), int(row["output_tokens"]),
                int(row["cache_read_tokens"]), int(row["cache_write_tokens"]),
                int(row["reasoning_tokens"]), int(row["tokens"])) == (
            sum(b["input"] for b in bills), sum(b["output"] for b in bills),
            sum(b["cache_read"] for b in bills), sum(b["cache_write"] for b in bills),
            sum(b["reasoning"] for b in bills),
            sum(b["input"] + b["output"] for b in bills)), label
        assert nano(row["cost_usd"]) == billed_nano(state), label
        assert str(row["cost_complete"]).lower() == "true", label
        if "usd" in truth.runs[label]:
            assert nano(row["usd_budget"]) == round(truth.runs[label]["usd"] * 1e9), label
            assert row["usd_budget_source"] == "span", label
    for label in ("gpt", "claude", "broke"):
        assert str(rows[truth.runs[label]["run_id"]]["usd_exhausted"]).lower() == "true", label
    tokens_row = rows[truth.runs["tokens"]["run_id"]]
    assert int(tokens_row["token_budget"]) == 12_000
    assert str(tokens_row["tokens_exhausted"]).lower() == "true"
