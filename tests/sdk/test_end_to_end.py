"""End to end: an agent written with the budget SDK the way the articles recommend (timeouts
handled as results, a 503 handled by degrading, asyncio and threads, a write whose reply was
lost and its read-back, a trickling server, a nested budget, a 503 with Retry-After, a
downstream service that spends the caller's deadline), exporting with the real OTLP exporter
and BatchSpanProcessor to a real `budgetscope serve`.

budgetscope is judged against an independent truth: what the fake servers recorded (requests,
executions, keys, bytes sent before the client went away) and what the agent's own code saw
(the exceptions it caught, the statuses it read, the runs it opened, with its own clock), never
against the SDK's records."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from budgetscope_sdk import BudgetExhausted, RunBudget, StepTimeout, current_step
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport
from opentelemetry import context as otel_context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from tests.sdk.support.servers import (
    CommitThenDropProxy,
    FakeModel,
    HangingTool,
    HangState,
    LedgerService,
    LedgerState,
    ModelState,
    ProxyState,
    Quiet,
    ScriptedTool,
    ScriptState,
    TrickleState,
    TrickleTool,
    reply,
    serve,
)
from tests.support.serve import CLI, start_serve, stop

AGENT = "billing-agent"
TRICKLE_SLICE = 0.5


@dataclass
class Truth:
    """What the agent's own code saw, step by step, and the runs it opened (its own clock)."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # run, step key, class
    writes: list[dict[str, Any]] = field(default_factory=list)

    def saw(self, run: str, key: str, cls: str) -> None:
        self.seen.append((run, key, cls))


# -- a downstream service that spends its caller's deadline ------------------------------------
@dataclass
class QuoteServiceState:
    tracer: Tracer
    rates_url: str
    client: httpx.Client = field(default_factory=lambda: httpx.Client(
        transport=BudgetTransport()))
    saw: list[str] = field(default_factory=list)  # what the service's own code caught


class QuoteService(Quiet):
    """Joins the caller's trace, takes the caller's deadline, and spends it on its own call to
    a rates service that never answers: that call must end by the caller's deadline."""

    def do_GET(self) -> None:
        state: QuoteServiceState = self.server.state  # type: ignore[attr-defined]
        headers = dict(self.headers.items())
        token = otel_context.attach(extract(headers))
        try:
            # A third of what the caller left is kept to answer in: the reply's trip back.
            with RunBudget.from_remote(headers, default=5, reserve=0.3, tracer=state.tracer,
                                       name="quote service") as budget, \
                    budget.step("tool", "rates", cap=5):
                try:
                    state.client.get(f"{state.rates_url}/rates")
                    state.saw.append("ok")
                except httpx.TimeoutException:
                    state.saw.append("client_timeout")
            reply(self, 200, {"quote": "unavailable", "reason": "rates timed out"})
        finally:
            otel_context.detach(token)


# -- the agent -----------------------------------------------------------------------------------
def run_budget(tracer: Tracer, total: float, reserve: float) -> RunBudget:
    return RunBudget(total, reserve=reserve, agent=AGENT, tracer=tracer, name="billing run")


async def handled_styles(tracer: Tracer, urls: dict[str, str], truth: Truth) -> None:
    """Run A: asyncio, every failure handled inside its step as a result."""
    label = "handled"
    async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
            run_budget(tracer, 3, 0.3) as budget:
        truth.runs[label] = {"trace_id": budget.trace_id, "total_ms": 3000}
        async with budget.step("model", "fake-gpt", cap=1):
            response = await client.post(f"{urls['model']}/v1/chat/completions",
                                         json={"model": "fake-gpt", "messages": []})
            truth.saw(label, "model:fake-gpt", "ok" if response.is_success else "error")

        # A write whose reply the proxy drops after the ledger committed it.
        intent = budget.intent("cancel_subscription", "sub_1")
        timed_out = False
        async with intent.attempt(cap=0.3) as call:
            try:
                await call.run(client.post(f"{urls['proxy']}/subscriptions/sub_1/cancel"))
                truth.saw(label, "tool:cancel_subscription", "ok")
            except StepTimeout:
                truth.saw(label, "tool:cancel_subscription", "client_timeout")
                timed_out = True
                call.timed_out()
        found = await intent.areconcile(
            lambda call: _landed(client, f"{urls['ledger']}/operations/{intent.key}"))
        truth.saw(label, "reconcile:cancel_subscription", "ok")
        truth.writes.append({"key": "tool:cancel_subscription", "uncertain": timed_out,
                             "read_back": found.result})

        # A write to a tool that never answers; nobody reads it back.
        timed_out = False
        async with budget.intent("send_email", "welcome").attempt(cap=0.2):
            try:
                await client.post(f"{urls['hang']}/send")
                truth.saw(label, "tool:send_email", "ok")
            except httpx.TimeoutException:
                truth.saw(label, "tool:send_email", "client_timeout")
                timed_out = True
        truth.writes.append({"key": "tool:send_email", "uncertain": timed_out, "read_back": None})

        # A 503 the agent handles by going on without the report.
        async with budget.step("tool", "fetch_report", cap=1):
            response = await client.get(f"{urls['tools']}/fetch_report")
            truth.saw(label, "tool:fetch_report",
                      "upstream_error" if response.status_code == 503 else "ok")

        # Two searches in parallel, each with its own slice.
        async def search(topic: str) -> None:
            async with budget.step("tool", "search", cap=1):
                response = await client.get(f"{urls['tools']}/search?q={topic}")
                truth.saw(label, "tool:search", "ok" if response.is_success else "error")

        await asyncio.gather(search("invoices"), search("refunds"))

        # A server that trickles a byte every 100 ms: the slice ends the call, not the trickle.
        async with budget.step("tool", "export", cap=TRICKLE_SLICE):
            try:
                await client.get(f"{urls['trickle']}/export")
                truth.saw(label, "tool:export", "ok")
            except httpx.TimeoutException:
                truth.saw(label, "tool:export", "client_timeout")
        budget.finish("summary without the report", done=["search"], missing=["report"])
    truth.runs[label]["outcome"] = "failed"  # the report is missing because of a 503


def library_research(client: httpx.Client, url: str, truth: Truth, label: str) -> float:
    """A library that opens its own ten-second budget, knowing nothing of the caller's."""
    with RunBudget(10, agent="researcher") as budget, \
            budget.step("tool", "lookup_docs", cap=9) as call:
        client.get(f"{url}/lookup_docs").raise_for_status()
        truth.saw(label, "tool:lookup_docs", "ok")
        return call.timeout


def retry_nested_downstream(tracer: Tracer, urls: dict[str, str], truth: Truth) -> None:
    """Run B: sync; a 503 with Retry-After longer than the budget, a nested budget, and a
    downstream service that honours the propagated deadline."""
    label = "propagated"
    with httpx.Client(transport=BudgetTransport()) as client, \
            run_budget(tracer, 2, 0.2) as budget:
        started = time.monotonic()
        truth.runs[label] = {"trace_id": budget.trace_id, "total_ms": 2000}
        try:
            budget.retry(budget.intent("quote", "eur"),
                         lambda call: client.get(f"{urls['tools']}/quote").raise_for_status(),
                         side_effect="read", attempts=3, backoff=0.05)
            truth.saw(label, "tool:quote", "ok")
        except httpx.HTTPStatusError as error:
            truth.saw(label, "tool:quote", "upstream_error")
            truth.runs[label]["retry_after"] = error.response.headers["retry-after"]

        with budget.step("subagent", "planner", cap=1.0) as plan:
            # Threads: two lookups in a pool, each carrying the step in a copied context.
            with ThreadPoolExecutor(2) as pool:
                futures = [pool.submit(contextvars.copy_context().run, _threaded_lookup,
                                       client, urls["tools"]) for _ in range(2)]
                for future in futures:
                    future.result()
            truth.saw(label, "subagent:planner", "ok")  # both lookups answered
            assert plan.timeout > 0

        left = 2 - (time.monotonic() - started)
        nested_slice = library_research(client, urls["tools"], truth, label)
        truth.saw(label, "subagent:researcher", "ok")  # the library returned its answer
        truth.runs[label]["nested_slice_s"] = nested_slice
        truth.runs[label]["left_at_nested_s"] = left

        with budget.step("tool", "quote_service", cap=0.9) as call:
            deadline = time.monotonic() + call.timeout
            headers: dict[str, str] = {}
            inject(headers)  # the caller's trace context travels with the deadline
            response = client.get(f"{urls['quote_service']}/quote", headers=headers)
            truth.saw(label, "tool:quote_service", "ok" if response.is_success else "error")
            truth.runs[label]["quote_deadline"] = deadline
        budget.finish("no quote", missing=["quote"])
    truth.runs[label]["outcome"] = "failed"  # the quote is missing because of a 503


def _threaded_lookup(client: httpx.Client, url: str) -> None:
    step = current_step()
    assert step is not None and step.name == "planner"  # the copied context carried it
    client.get(f"{url}/lookup").raise_for_status()


def exhausted_run(tracer: Tracer, urls: dict[str, str], truth: Truth) -> None:
    """Run C: a slow fetch spends the budget, the summary is refused, the answer partial."""
    label = "exhausted"
    with httpx.Client(transport=BudgetTransport()) as client, \
            run_budget(tracer, 1.0, 0.2) as budget:
        truth.runs[label] = {"trace_id": budget.trace_id, "total_ms": 1000}
        with budget.step("tool", "fetch_report", cap=0.75):
            client.get(f"{urls['tools']}/slow_report").raise_for_status()
            truth.saw(label, "tool:fetch_report", "ok")
        try:
            with budget.step("tool", "summarise", minimum=0.5):
                raise AssertionError("a refused step never runs")
        except BudgetExhausted:
            truth.saw(label, "tool:summarise", "refused")
            budget.finish("report only", done=["fetch_report"], missing=["summary"])
    truth.runs[label]["outcome"] = "partial"


async def _landed(client: httpx.AsyncClient, url: str) -> bool:
    return (await client.get(url)).status_code == 200


def report(db: Path, name: str) -> list[dict[str, Any]]:
    done = subprocess.run([*CLI, "--db", str(db), "report", name, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_budgetscope_matches_what_the_servers_and_the_agent_saw(tmp_path: Path) -> None:
    db = tmp_path / "agent.duckdb"
    truth = Truth()
    process, announced = start_serve(db, "--no-ui")
    try:
        with ExitStack() as servers:
            ledger = LedgerState()
            ledger_url, _ = servers.enter_context(serve(LedgerService, ledger))
            proxy_url, proxy = servers.enter_context(serve(CommitThenDropProxy,
                                                           ProxyState(ledger_url)))
            script = ScriptState({
                "/fetch_report": [(503, 0.0)], "/search": [(200, 0.05)],
                "/quote": [(503, 0.0, {"Retry-After": "5"})], "/lookup": [(200, 0.02)],
                "/lookup_docs": [(200, 0.02)], "/slow_report": [(200, 0.45)]})
            tools_url, _ = servers.enter_context(serve(ScriptedTool, script))
            model_url, _ = servers.enter_context(serve(FakeModel, ModelState("search", {})))
            hang_url, hang = servers.enter_context(serve(HangingTool, HangState()))
            rates_url, rates = servers.enter_context(serve(HangingTool, HangState()))
            trickle = TrickleState(interval=0.1, size=30)
            trickle_url, _ = servers.enter_context(serve(TrickleTool, trickle))
            provider = TracerProvider(resource=Resource.create({"service.name": "billing"}))
            provider.add_span_processor(BatchSpanProcessor(
                OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=30)))
            tracer = provider.get_tracer("billing-agent")
            service = QuoteServiceState(tracer, rates_url)
            servers.callback(service.client.close)
            service_url, _ = servers.enter_context(serve(QuoteService, service))
            urls = {"ledger": ledger_url, "proxy": proxy_url, "tools": tools_url,
                    "model": model_url, "hang": hang_url, "trickle": trickle_url,
                    "quote_service": service_url}
            asyncio.run(handled_styles(tracer, urls, truth))
            retry_nested_downstream(tracer, urls, truth)
            exhausted_run(tracer, urls, truth)
            # What the servers saw, before they stop.
            assert proxy.client_closed_after_drop.wait(10) and hang.client_closed.wait(10)
            assert rates.client_closed.wait(10) and trickle.finished.wait(10)
            assert provider.force_flush(30_000)
            provider.shutdown()
    finally:
        code, _, err = stop(process)
    assert code == 0, err

    # -- the servers' own record ---------------------------------------------------------
    assert ledger.executions == ["/subscriptions/sub_1/cancel"]  # the lost-reply write landed
    (send_key,) = {hang.headers.get("Idempotency-Key")}
    assert send_key and send_key.startswith("send_email-")
    assert script.calls["/quote"] == 1  # Retry-After 5 s did not fit: asked once, not thrice
    assert truth.runs["propagated"]["retry_after"] == "5"
    (sent,) = trickle.sent
    assert sent < trickle.size // 2  # the trickle did not keep the call alive
    # The service spent the caller's deadline: its own call to the rates service (which never
    # answers) carried less than the caller's 900 ms and was given up before the caller's
    # deadline (one process, one monotonic clock), so the caller got its answer in time.
    assert service.saw == ["client_timeout"]
    remaining_sent = int(rates.headers["Deadline-Remaining-Ms"])
    assert 0 < remaining_sent <= 900 * 0.7
    assert rates.closed_at is not None
    assert rates.closed_at < truth.runs["propagated"]["quote_deadline"]

    # -- runs: one per run the agent opened (the nested and the remote budgets are not runs) --
    runs = {row["run_id"]: row for row in report(db, "runs")}
    by_label = {label: runs[run["trace_id"]] for label, run in truth.runs.items()}
    assert set(runs) == {run["trace_id"] for run in truth.runs.values()}
    for label, row in by_label.items():
        expected = truth.runs[label]
        assert (row["agent"], row["budget_ms"], row["outcome"], row["exhausted"],
                row["budget_source"]) == (AGENT, expected["total_ms"], expected["outcome"],
                                          expected["outcome"] == "partial", "span"), label
    assert (by_label["exhausted"]["culprit"], by_label["exhausted"]["holder"]) == (
        "tool:fetch_report", "tool:summarise")

    # -- every step's class, as the agent and the services saw it ------------------------
    expected_classes: dict[str, Counter[str]] = {}
    for _, key, cls in truth.seen:
        expected_classes.setdefault(key, Counter())[cls] += 1
    expected_classes.setdefault("tool:rates", Counter())[service.saw[0]] += 1
    columns = {"ok": "ok", "client_timeout": "client_timeouts",
               "upstream_error": "upstream_errors", "refused": "refused",
               "cancelled": "cancelled", "client_error": "client_errors", "error": "errors"}
    failures = {row["step_key"]: row for row in report(db, "failures")}
    assert set(failures) == set(expected_classes), set(failures) ^ set(expected_classes)
    for key, counts in expected_classes.items():
        assert {column: failures[key][column] for column in columns.values()} == {
            column: counts[cls] for cls, column in columns.items()}, key

    # -- writes: the lost reply read back and landed; the hung write an orphan --------------
    reconciliation = {row["step_key"]: row for row in report(db, "reconciliation")}
    assert set(reconciliation) == {write["key"] for write in truth.writes}
    for write in truth.writes:
        row, read = reconciliation[write["key"]], write["read_back"]
        assert (row["write_steps"], row["uncertain_writes"], row["reconciled_writes"],
                row["orphan_writes"]) == (1, int(write["uncertain"]), int(read is not None),
                                          int(write["uncertain"] and read is None)), write
        if read is not None:
            assert row[read] == 1, write
    # What the agent read back is what the ledger did, and what it was told was left unknown.
    assert [w["read_back"] for w in truth.writes] == ["landed", None]
    assert all(w["uncertain"] for w in truth.writes)
    on_call = subprocess.run([*CLI, "--db", str(db), "run", truth.runs["handled"]["trace_id"]],
                             capture_output=True, text=True, timeout=120)
    assert on_call.returncode == 0, on_call.stderr
    assert send_key in on_call.stdout  # the orphan's key, as the tool received it

    # -- times: the trickled call lasted its slice; the nested budget was clamped ----------
    with duckdb.connect(str(db), read_only=True) as con:
        (export_ms,) = con.execute(
            "SELECT duration_ms FROM steps WHERE step_key = 'tool:export'").fetchone()
        (nested_allocated,) = con.execute(
            "SELECT allocated_ms FROM steps WHERE step_key = 'subagent:researcher'").fetchone()
        (rates_run,) = con.execute(
            "SELECT run_id FROM steps WHERE step_key = 'tool:rates'").fetchone()
    assert export_ms < 3 * TRICKLE_SLICE * 1000  # not the 3 s the trickle would have taken
    propagated = truth.runs["propagated"]
    assert nested_allocated <= propagated["left_at_nested_s"] * 1000  # clamped, not 10 s
    assert propagated["nested_slice_s"] < propagated["left_at_nested_s"]
    assert rates_run == propagated["trace_id"]  # the service's call is part of the caller's run
