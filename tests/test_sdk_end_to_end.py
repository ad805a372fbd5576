"""End to end (issue 16): an agent built with the budget SDK, its tools and model on 127.0.0.1,
exports with the real OTLP/HTTP exporter and BatchSpanProcessor to a real `budgetscope serve`;
every run's budget, outcome, culprit, holder, step classes, writes and reconciliations in
budgetscope's reports equal what the agent itself logged (RunBudget.records)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
from budgetscope_sdk import BudgetExhausted, RunBudget, StepRecord, TimedOut, call_tool
from budgetscope_sdk.httpx_transport import BudgetTransport
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from tests.sdk_servers import (
    CommitThenDropProxy,
    FakeModel,
    HangingTool,
    HangState,
    LedgerService,
    LedgerState,
    ModelState,
    ProxyState,
    ScriptedTool,
    ScriptState,
    serve,
)
from tests.test_serve import CLI, start_serve, stop

AGENT = "billing-agent"


@dataclass
class RunLog:
    """What the agent knows about one of its runs, from the SDK's own records."""

    run_id: str
    total_ms: int
    outcome: str
    start_ns: int
    end_ns: int
    records: list[StepRecord]  # every step, nested ones (a subagent's) with top_level False


def log_of(budget: RunBudget, *children: RunBudget) -> RunLog:
    nested = [StepRecord(**{**record.__dict__, "top_level": False})
              for child in children for record in child.records]
    assert budget.outcome is not None and budget.ended_unix_ns is not None
    return RunLog(budget.trace_id, int(budget.total_s * 1000), budget.outcome,
                  budget.started_unix_ns, budget.ended_unix_ns, budget.records + nested)


def agent_runs(tracer: Tracer, urls: dict[str, str]) -> list[RunLog]:
    """Five runs of a billing agent, each a different way a budget gets spent."""
    logs: list[RunLog] = []
    client = httpx.Client(transport=BudgetTransport())
    tools, model = urls["tools"], urls["model"]

    def run(total: float, reserve: float) -> RunBudget:
        return RunBudget(total, reserve=reserve, agent=AGENT, tracer=tracer, name="billing run")

    # 1. Completed: a model call, a subagent's search, a report fetch.
    with run(3, 0.3) as budget:
        with budget.step("model", "fake-gpt", cap=1):
            client.post(f"{model}/v1/chat/completions",
                        json={"model": "fake-gpt", "messages": []}).raise_for_status()
        with budget.child(share=0.5, name="researcher") as researcher, \
                researcher.step("tool", "search", cap=1):
            client.get(f"{tools}/search").raise_for_status()
        with budget.step("tool", "fetch_report", cap=1):
            client.get(f"{tools}/fetch_report").raise_for_status()
    logs.append(log_of(budget, researcher))

    # 2. A write whose reply was lost: timed out, then reconciled by its key (it landed).
    with run(3, 0.3) as budget:
        intent = budget.intent("cancel_subscription", "sub_1")
        result = call_tool(
            budget, "cancel_subscription",
            lambda call: client.post(f"{urls['proxy']}/subscriptions/sub_1/cancel",
                                     headers={"Idempotency-Key": call.idempotency_key}),
            side_effect="write", intent=intent, cap=0.3)
        assert isinstance(result, TimedOut) and result.side_effect_status == "possible"
        found = intent.reconcile(
            lambda call: client.get(f"{urls['ledger']}/operations/{intent.key}")
            .status_code == 200)
        assert found.result == "landed"
    logs.append(log_of(budget))

    # 3. An upstream 503, then a retry after a recorded backoff.
    with run(3, 0.3) as budget:
        budget.retry(budget.intent("lookup_invoice", "inv_9"),
                     lambda call: client.get(f"{tools}/lookup_invoice").raise_for_status(),
                     side_effect="read", cap=1, backoff=0.05)
    logs.append(log_of(budget))

    # 4. Exhausted: a slow fetch spends the budget, the summary is refused, the answer partial.
    with run(1.0, 0.2) as budget:
        with budget.step("tool", "fetch_report", cap=0.75):
            client.get(f"{tools}/slow_report").raise_for_status()
        try:
            with budget.step("tool", "summarise", minimum=0.5):
                raise AssertionError("a refused step never runs")
        except BudgetExhausted:
            budget.finish("report only", done=["fetch_report"], missing=["summary"])
    logs.append(log_of(budget))

    # 5. An orphan: a write that hung and that nobody read back.
    with run(2, 0.2) as budget:
        result = call_tool(
            budget, "send_email",
            lambda call: client.post(f"{urls['hang']}/send",
                                     headers={"Idempotency-Key": call.idempotency_key}),
            side_effect="write", intent=budget.intent("send_email", "welcome"), cap=0.2)
        assert isinstance(result, TimedOut)
    logs.append(log_of(budget))
    client.close()
    return logs


# -- SPEC §4 and §6 worked from the agent's own log --------------------------------------------
def culprit_and_holder(log: RunLog) -> tuple[str, str]:
    deadline = log.start_ns + log.total_ms * 1_000_000
    end = min(log.end_ns, deadline)
    top = [r for r in log.records if r.top_level]
    cuts = sorted({log.start_ns, end, *(min(max(t, log.start_ns), end)
                                        for r in top for t in (r.start_unix_ns, r.end_unix_ns))})
    spent = [0.0] * len(top)
    for left, right in zip(cuts, cuts[1:], strict=False):
        active = [i for i, r in enumerate(top)
                  if r.start_unix_ns < right and r.end_unix_ns > left]
        for i in active:
            spent[i] += (right - left) / len(active)
    culprit = min(range(len(top)), key=lambda i: (-spent[i], top[i].start_unix_ns))
    at_deadline = [r for r in top if r.start_unix_ns <= deadline < r.end_unix_ns]
    if at_deadline:
        holder = max(at_deadline, key=lambda r: r.start_unix_ns)
    else:
        holder = max((r for r in top if r.start_unix_ns < log.end_ns),
                     key=lambda r: r.start_unix_ns)
    return top[culprit].key, holder.key


def reconciliation_of(logs: list[RunLog]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for log in logs:
        reads = [r for r in log.records if r.kind == "reconcile"]
        for write in (r for r in log.records if r.side_effect == "write"):
            row = out.setdefault(write.key, Counter())
            row["write_steps"] += 1
            uncertain = write.effect_status == "possible" or (
                write.effect_status is None and write.outcome in ("client_timeout", "cancelled"))
            matching = sorted((r for r in reads if r.idempotency_key == write.idempotency_key),
                              key=lambda r: r.end_unix_ns)
            row["uncertain_writes"] += uncertain
            row["reconciled_writes"] += bool(matching)
            row["orphan_writes"] += uncertain and not matching
            if matching:
                row[matching[-1].reconcile_result or "unknown"] += 1
    return {key: {column: row[column] for column in (
        "write_steps", "uncertain_writes", "reconciled_writes", "orphan_writes", "landed",
        "not_landed", "unknown")} for key, row in out.items()}


def report(db: Path, name: str) -> list[dict]:
    done = subprocess.run([*CLI, "--db", str(db), "report", name, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_sdk_agent_s_runs_read_back_from_budgetscope_as_it_logged_them(tmp_path: Path):
    db = tmp_path / "agent.duckdb"
    process, announced = start_serve(db, "--no-ui")
    try:
        with ExitStack() as servers:
            ledger_url, _ = servers.enter_context(serve(LedgerService, LedgerState()))
            proxy_url, _ = servers.enter_context(serve(CommitThenDropProxy,
                                                       ProxyState(ledger_url)))
            tools_url, _ = servers.enter_context(serve(ScriptedTool, ScriptState({
                "/search": [(200, 0.05)], "/fetch_report": [(200, 0.1)],
                "/lookup_invoice": [(503, 0.0), (200, 0.02)], "/slow_report": [(200, 0.4)]})))
            model_url, _ = servers.enter_context(serve(FakeModel, ModelState("search", {})))
            hang_url, _ = servers.enter_context(serve(HangingTool, HangState()))
            provider = TracerProvider(resource=Resource.create({"service.name": "billing"}))
            provider.add_span_processor(BatchSpanProcessor(
                OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=30)))
            logs = agent_runs(provider.get_tracer("billing-agent"), {
                "ledger": ledger_url, "proxy": proxy_url, "tools": tools_url,
                "model": model_url, "hang": hang_url})
            assert provider.force_flush(30_000)
            provider.shutdown()
    finally:
        code, _, err = stop(process)
    assert code == 0, err
    assert [log.outcome for log in logs] == ["completed", "completed", "completed", "partial",
                                             "completed"]

    runs = {row["run_id"]: row for row in report(db, "runs")}
    assert set(runs) == {log.run_id for log in logs}
    for log in logs:
        row = runs[log.run_id]
        culprit, holder = culprit_and_holder(log)
        assert (row["agent"], row["budget_ms"], row["outcome"], row["exhausted"],
                row["budget_source"], row["culprit"], row["holder"]) == (
            AGENT, log.total_ms, log.outcome, log.outcome in ("partial", "exhausted"), "span",
            culprit, holder), log
    assert runs[logs[3].run_id]["culprit"] == "tool:fetch_report"
    assert runs[logs[3].run_id]["holder"] == "tool:summarise"  # refused, but it held the end

    classes = ("ok", "client_timeout", "upstream_error", "refused", "cancelled", "client_error",
               "error")
    columns = dict(zip(classes, ("ok", "client_timeouts", "upstream_errors", "refused",
                                 "cancelled", "client_errors", "errors"), strict=True))
    logged: dict[str, Counter[str]] = {}
    for log in logs:
        for record in log.records:
            logged.setdefault(record.key, Counter())[record.outcome] += 1
    failures = {row["step_key"]: row for row in report(db, "failures")}
    assert set(failures) == set(logged)
    for key, counts in logged.items():
        assert failures[key]["steps"] == sum(counts.values()), key
        assert {columns[c]: failures[key][columns[c]] for c in classes} == {
            columns[c]: counts[c] for c in classes}, key

    reconciliation = {row["step_key"]: {column: row[column] for column in (
        "write_steps", "uncertain_writes", "reconciled_writes", "orphan_writes", "landed",
        "not_landed", "unknown")} for row in report(db, "reconciliation")}
    assert reconciliation == reconciliation_of(logs)
    assert reconciliation["tool:send_email"]["orphan_writes"] == 1
    assert reconciliation["tool:cancel_subscription"]["landed"] == 1
