"""The ClickHouse backend (#8) on a real ClickHouse engine (chdb, in-process): the Collector
exporter's otel_traces table, loaded with the same traces as a DuckDB file, gives every report,
run view and dashboard number the DuckDB backend gives.

Two data sets, each stored both ways:
- the bundled sample traces (52k spans), through `budgetscope ingest`'s decoders into DuckDB
  and through bench.support.clickhouse_load.traces (the same decoders, written as the
  exporter writes) into otel_traces;
- EDGE: hand-made traces (real OpenTelemetry SDK spans) for what the sample lacks: a run
  nested below a root (run id trace/span), a subagent with steps inside it, parallel steps, a
  reconcile step linking to a write of another trace, gRPC status names, HTTP 504, exception
  events, and budget.* attributes sent as strings in odd forms (" 25000 ", "3000.0", "abc").

Equality is exact: reports compare as CSV bytes (the CLI's output). The floats in them are
computed by the same operations in the same order in both engines, then rounded to 3 or 6
decimals by queries/render.py; no tolerance was needed on these data.
chdb allows one data folder per process at a time, so the module uses one folder for both
data sets, in two ClickHouse databases' worth of time: EDGE is appended after the sample
checks (fixture order), which also exercises the rebuild when otel_traces changes.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from streamlit.testing.v1 import AppTest

from bench.support.clickhouse_load.traces import load_files, load_requests
from budgetscope.cli import cli
from queries import reports
from queries.filters import Filters
from queries.loader import CLICKHOUSE_QUERY_NAMES, QUERY_NAMES
from queries.prices import price_check
from queries.render import to_csv_bytes
from queries.run_view import RunNotFound, load_run, span_details
from store import (
    BACKEND_ENV,
    Change,
    PriceChange,
    clickhouse,
    clickhouse_declared,
    clickhouse_prices,
    parse_from,
    parse_rate,
)
from store import connect as duckdb_connect
from tests.support import ui
from tests.support.cost_fleet import CHANGES as COST_CHANGES
from tests.support.cost_fleet import DECLARATIONS as COST_DECLARATIONS
from tests.support.cost_fleet import cost_fleet_spans
from tests.support.cost_parity import TABLES, difference, tidy
from tests.support.trace_builder import T0_NS, TraceBuilder, open_db, store

# slow, left out of make test-fast: ClickHouse (chdb) beside DuckDB, every change on the backend
# rebuilding its derived tables (3 s each on the sample, quiet; 4 in the longest comparison).
pytestmark = pytest.mark.slow

CLI_REPORTS = list(reports.REPORTS)
DASHBOARD_ONLY = ["attribution_summary", "utilisation_histogram", "step_utilisation",
                  "reconciliation_by_period", "failures_daily", "attribution_completed",
                  "orphan_writes", "headline", "cost_attribution_summary", "token_attribution",
                  "token_attribution_summary"]
FILTER_ARGS = {
    "all": [],
    "window": ["--since", "2026-11-02", "--until", "2026-11-16"],
    "agent": ["--agent", "billing-agent"],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chdb") / "data"
    yield path
    clickhouse.close_all()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def sample_duckdb(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ui.sample_db(tmp_path_factory)


@pytest.fixture(scope="module")
def sample_backend(folder: Path) -> str:
    url = f"chdb://{folder}"
    con = clickhouse.connect(url)
    assert load_files(con, [ui.SAMPLE_TRACES]) == 52_169
    return url


def invoke(*args: str) -> bytes:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


# ---- one definition, two dialects -------------------------------------------------------

def test_every_clickhouse_query_translates_a_duckdb_one() -> None:
    """Besides the exporter's table and the derivation, each ClickHouse file is the dialect of
    a DuckDB file of the same name (never a second, diverging analysis)."""
    own = {"otel_traces_table", "otel_logs_table", "derive_build", "derive_scratch_drop",
           "derive_state", "derive_log_exceptions", "derive_log_exceptions_none"}
    assert CLICKHOUSE_QUERY_NAMES - own <= QUERY_NAMES


def test_backend_urls() -> None:
    assert clickhouse.parse_backend_url("chdb:///var/lib/t").path == "/var/lib/t"
    server = clickhouse.parse_backend_url("clickhouse://bob:s%40cret@ch.internal:9000/otel")
    assert (server.user, server.password, server.host, server.port, server.database) == \
        ("bob", "s@cret", "ch.internal", 9000, "otel")
    assert "s@cret" not in server.describe()
    for bad in ("mysql://x/y", "chdb://", "clickhouse:///otel", "clickhouse://h:port/x"):
        with pytest.raises(clickhouse.BackendError):
            clickhouse.parse_backend_url(bad)
    result = CliRunner().invoke(cli, ["--backend", "mysql://x", "report", "runs"])
    assert result.exit_code == 1 and "a backend is chdb:///FOLDER" in result.output


# ---- the exporter's table ----------------------------------------------------------------

def test_otel_traces_is_the_exporters_table(sample_backend: str) -> None:
    con = clickhouse.connect(sample_backend)
    types = dict(con.frame_text(
        "SELECT name, type FROM system.columns WHERE table = 'otel_traces' "
        "AND database = currentDatabase()", {}).itertuples(index=False, name=None))
    assert types["SpanAttributes"] == "Map(LowCardinality(String), String)"
    assert types["Duration"] == "UInt64"
    assert types["Timestamp"] == "DateTime64(9)"
    assert types["Events.Attributes"] == "Array(Map(LowCardinality(String), String))"
    assert types["Links.TraceId"] == "Array(String)"
    assert types["StatusCode"] == "LowCardinality(String)"
    rows = con.frame_text(
        "SELECT DISTINCT StatusCode, SpanKind FROM otel_traces ORDER BY ALL", {})
    assert set(rows["StatusCode"]) <= {"Unset", "Ok", "Error"}
    assert set(rows["SpanKind"]) <= {"Unspecified", "Internal", "Server", "Client", "Producer",
                                     "Consumer"}
    # attribute values are strings, as AsString writes them; events are nested arrays
    row = con.frame_text(
        "SELECT SpanAttributes['budget.total_ms'] AS total, toTypeName(total) AS type, "
        "Duration = toUnixTimestamp64Nano(Timestamp) - toUnixTimestamp64Nano(Timestamp) "
        "+ Duration AS same FROM otel_traces WHERE ParentSpanId = '' LIMIT 1", {}).iloc[0]
    assert row["type"] == "String" and row["total"].isdigit()
    exceptions = con.scalar("SELECT count() FROM otel_traces "
                            "WHERE has(Events.Name, 'exception')")
    assert exceptions > 0


# ---- every report equal to DuckDB's --------------------------------------------------------

@pytest.mark.parametrize("filters", list(FILTER_ARGS))
@pytest.mark.parametrize("name", CLI_REPORTS)
def test_cli_report_equal_to_duckdb(sample_duckdb: str, sample_backend: str, name: str,
                                    filters: str) -> None:
    args = ["report", name, *FILTER_ARGS[filters]]
    expected = invoke("--db", sample_duckdb, *args)
    got = invoke("--backend", sample_backend, *args)
    assert got == expected


@pytest.mark.parametrize("name", ["runs", "weekly"])
def test_hostile_filter_value_is_bound(sample_backend: str, name: str) -> None:
    # On the queries themselves: the CLI refuses an agent it does not know before any report
    # query runs (a usage error naming the known agents).
    con = clickhouse.connect(sample_backend)
    clickhouse.ensure_derived(con)  # as the commands do before a report
    rows = getattr(reports, name)(con, Filters(agent="' OR 1=1 --"))
    assert rows.empty  # the value was compared, not run
    refused = CliRunner().invoke(cli, ["--backend", sample_backend, "report", name, "--agent",
                                       "' OR 1=1 --"])
    assert refused.exit_code == 2 and "known agents: billing-agent" in refused.output


@pytest.mark.parametrize("name", DASHBOARD_ONLY)
def test_dashboard_queries_equal_to_duckdb(sample_duckdb: str, sample_backend: str,
                                           name: str) -> None:
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        for filters in (Filters(), Filters.parse("2026-11-02", "2026-11-16")):
            expected = getattr(reports, name)(duck, filters)
            got = getattr(reports, name)(clickhouse.connect(sample_backend), filters)
            assert list(got.columns) == list(expected.columns)
            assert to_csv_bytes(got) == to_csv_bytes(expected), name
    finally:
        duck.close()


def test_tool_latency_equal_to_duckdb(sample_duckdb: str, sample_backend: str) -> None:
    """One row per call; calls of equal duration may come in either order, so sort first."""
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        expected = reports.tool_latency(duck)
    finally:
        duck.close()
    got = reports.tool_latency(clickhouse.connect(sample_backend))
    key = list(expected.columns)
    assert to_csv_bytes(got.sort_values(key).reset_index(drop=True)) == \
        to_csv_bytes(expected.sort_values(key).reset_index(drop=True))


def test_database_status(sample_backend: str) -> None:
    con = clickhouse.connect(sample_backend)
    clickhouse.ensure_derived(con)  # as every reader does: the test holds on its own
    row = reports.database_status(con).iloc[0]
    assert (int(row["spans"]), int(row["runs"]), int(row["traces_pending_derivation"])) == \
        (52_169, 1_800, 0)


def test_run_command_equal_to_duckdb(sample_duckdb: str, sample_backend: str) -> None:
    con = clickhouse.connect(sample_backend)
    clickhouse.ensure_derived(con)  # the runs are picked from the derived tables
    picks = con.frame_text(
        "SELECT (SELECT any(run_id) FROM budgetscope_write_steps WHERE orphan) AS orphan, "
        "(SELECT any(run_id) FROM budgetscope_write_steps WHERE reconciled) AS reconciled, "
        "(SELECT any(run_id) FROM budgetscope_runs WHERE exhausted "
        " AND culprit_span_id != holder_span_id) AS blamed, "
        "(SELECT any(run_id) FROM budgetscope_steps WHERE kind = 'subagent') AS subagent",
        {}).iloc[0]
    commands = 0
    for run_id in picks:
        # wide enough that no command wraps: its next step's commands name what each read
        found = invoke("--backend", sample_backend, "run", run_id, "--width", "400")
        assert found == _as_read_from_backend(
            invoke("--db", sample_duckdb, "run", run_id, "--width", "400"), sample_duckdb,
            sample_backend)
        commands += found.count(f"budgetscope --backend {sample_backend} ".encode())
    assert commands > 0  # some run's next step is a command, and it reads the backend
    missing = CliRunner().invoke(cli, ["--backend", sample_backend, "run", "0" * 32])
    assert missing.exit_code == 1 and "no run" in missing.output


def test_step_details_equal_to_duckdb(sample_duckdb: str, sample_backend: str) -> None:
    """The run view's step details (attributes, events, exception, status message) read from
    the Collector's otel_traces as from the DuckDB file: the exporter writes every attribute as
    a string, which reads as the DuckDB value's JSON text does."""
    con = clickhouse.connect(sample_backend)
    run_id = str(con.frame_text(
        "SELECT any(run_id) AS run_id FROM budgetscope_steps WHERE class = 'client_timeout' "
        "AND is_write", {}).iloc[0]["run_id"])
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        expected = span_details(duck, run_id, run_id)
    finally:
        duck.close()
    found = span_details(con, run_id, run_id)
    assert found == expected
    assert any(step.exception_message and step.status == "ERROR" for step in found)


def test_check_equal_to_duckdb(sample_duckdb: str, sample_backend: str) -> None:
    args = ["check", "--until", "2026-11-30", "--window", "14d", "--max-exhaustion-rate",
            "0.01", "--min-reconciliation-rate", "0.5", "--format", "json"]
    duck = CliRunner().invoke(cli, ["--db", sample_duckdb, *args])
    ch = CliRunner().invoke(cli, ["--backend", sample_backend, *args])
    assert duck.exit_code == ch.exit_code == 1, (duck.output, ch.output)  # breaches, both
    assert ch.stdout_bytes == _as_read_from_backend(duck.stdout_bytes, sample_duckdb,
                                                    sample_backend)
    assert f"budgetscope --backend {sample_backend} report runs".encode() in ch.stdout_bytes


def _as_read_from_backend(output: bytes, db: str, backend: str) -> bytes:
    """DuckDB's output with the commands it prints naming the backend instead of the file:
    a printed command reads what the command that printed it read."""
    return output.replace(f"budgetscope --db {db} ".encode(),
                          f"budgetscope --backend {backend} ".encode())


@pytest.mark.parametrize("policy", [[], ["--cap", "fetch_report=2s", "--deadline", "25s"],
                                    ["--retries", "--view", "tools"]])
def test_simulate_equal_to_duckdb(sample_duckdb: str, sample_backend: str,
                                  policy: list[str]) -> None:
    args = ["simulate", "--since", "2026-11-09", *policy]
    assert invoke("--backend", sample_backend, *args) == invoke("--db", sample_duckdb, *args)


# ---- the dashboard's data layer on the backend ----------------------------------------------

def test_dashboard_page_on_clickhouse(sample_duckdb: str, sample_backend: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The weekly page (its tables: the report's rows with a row over all agents per week,
    the cost columns) shows on the backend what it shows on the DuckDB file."""
    monkeypatch.setenv("BUDGETSCOPE_DB", str(Path(sample_duckdb).with_suffix(".absent")))
    monkeypatch.setenv(BACKEND_ENV, sample_backend)
    shown = _weekly_page_tables()
    monkeypatch.delenv(BACKEND_ENV)
    monkeypatch.setenv("BUDGETSCOPE_DB", sample_duckdb)
    expected = _weekly_page_tables()
    assert len(shown) == len(expected) > 0
    for got, want in zip(shown, expected, strict=True):
        pd.testing.assert_frame_equal(got, want)
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        weekly = reports.weekly(duck, Filters.parse(ui.SINCE, ui.UNTIL))
    finally:
        duck.close()
    # the report's rows and, before each week's, the row over all agents
    assert len(shown[0]) == len(weekly) + weekly["week"].nunique()


def test_cost_page_names_the_unpriced_models_on_clickhouse(sample_duckdb: str,
                                                          sample_backend: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The Cost page's pricing coverage lists the models seen without a price, with the
    command that prices each, on the backend as on the file (it read None there before)."""
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        want = price_check(duck)
    finally:
        duck.close()
    backend = clickhouse.connect(sample_backend)
    clickhouse.ensure_derived(backend)  # as the dashboard's reader does first
    got = price_check(backend)
    assert len(want) > 0  # the sample's model with no price
    pd.testing.assert_frame_equal(got, want)
    monkeypatch.setenv("BUDGETSCOPE_DB", str(Path(sample_duckdb).with_suffix(".absent")))
    monkeypatch.setenv(BACKEND_ENV, sample_backend)
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.switch_page("app_pages/cost.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    # the table whose columns are prices check's (AppTest keeps no key of such a table)
    shown = [frame.value for frame in at.dataframe
             if list(frame.value.columns[:3]) == ["model", "provider", "steps"]]
    assert [list(frame["steps"]) for frame in shown] == [list(want["steps"])]
    commands = [c for c in want["command"] if c]
    assert any(block.value == "\n".join(commands) for block in at.code)


def _weekly_page_tables() -> list[pd.DataFrame]:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in {"range": "custom", "since": ui.SINCE, "until": ui.UNTIL}.items():
        at.query_params[key] = value
    at.switch_page("app_pages/weekly.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return [frame.value for frame in at.dataframe]


# ---- tokens and dollars (docs/metrics.md §11) ------------------------------------------------

def _cost_rows(con: object, table: str) -> list[dict]:
    """A table's §11 rows (tests/support/cost_parity.py's columns) from either engine."""
    duck_table, clickhouse_table, columns, key = TABLES[table]
    where = " WHERE note = 'usage_values_ignored'" if table == "notes" else ""
    if isinstance(con, clickhouse.ClickHouseConnection):
        clickhouse.ensure_derived(con)
        frame = con.frame_text(f"SELECT {', '.join(columns)} FROM {clickhouse_table}{where}",
                                {})
    else:
        frame = con.execute(f"SELECT {', '.join(columns)} FROM {duck_table}{where}").df()
    return tidy(frame, key)


@pytest.mark.parametrize("table", list(TABLES))
def test_sample_cost_rows_equal_to_duckdb(sample_duckdb: str, sample_backend: str,
                                          table: str) -> None:
    """The sample's usage (cache reads, reasoning, an unpriced model, runs over their dollar
    budget) gives the same runs, steps, metered spans and notes on both engines."""
    duck = duckdb_connect(sample_duckdb, read_only=True)
    try:
        want = _cost_rows(duck, table)
    finally:
        duck.close()
    got = _cost_rows(clickhouse.connect(sample_backend), table)
    assert got == want, difference(got, want)
    if table == "metered_spans":
        assert len(want) > 1_000
        assert {"bundled", "unpriced"} <= {row["cost_source"] for row in want}


# ---- edge cases the sample lacks ------------------------------------------------------------

def edge_spans() -> list:
    b = TraceBuilder(seed=808, service="edge-svc")
    t = T0_NS + 3 * 24 * 3_600 * 10**9
    # A root run with a nested run below it (its own budget and steps) and a subagent step
    # whose steps sit inside it; attributes sent as strings in odd forms.
    root = b.span("agent run", 0, 30_000, t0_ns=t, attributes={
        "budget.total_ms": " 25000 ", "gen_ai.agent.name": "edge"})
    b.span("tool search", 0, 9_000, parent=root, t0_ns=t, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "budget.allocated_ms": "3000.0", "rpc.grpc.status_code": "DEADLINE_EXCEEDED"})
    b.span("tool lookup", 4_000, 12_000, parent=root, t0_ns=t, attributes={
        "budget.step.kind": "TOOL", "budget.step.name": "lookup",
        "http.response.status_code": 504, "budget.cap_ms": "abc"})
    sub = b.span("invoke_agent helper", 12_000, 26_000, parent=root, t0_ns=t, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})
    b.span("chat m", 12_500, 20_000, parent=sub, t0_ns=t, exceptions=["ReadTimeoutError"],
           attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    nested = b.span("nested run", 20_000, 29_000, parent=root, t0_ns=t, attributes={
        "budget.total_ms": 5_000, "budget.step.kind": "subagent",
        "budget.step.name": "nested"})
    b.span("model inner", 20_000, 27_000, parent=nested, t0_ns=t, error=True, attributes={
        "budget.step.kind": "model", "budget.step.name": "inner", "budget.hedge": "yes"})
    write = b.span("tool pay", 27_000, 30_000, parent=root, t0_ns=t, attributes={
        "budget.step.kind": "tool", "budget.step.name": "pay", "budget.side_effect": "write",
        "budget.outcome": "client_timeout", "budget.idempotency_key": "k-1",
        "budget.attempt": 1.0})
    # Another trace reads the write back through a span link.
    other = b.span("agent run", 40_000, 45_000, t0_ns=t, attributes={
        "budget.total_ms": 10_000, "budget.run.outcome": "completed",
        "gen_ai.agent.name": "edge"})
    b.span("reconcile pay", 40_000, 41_000, parent=other, t0_ns=t, links=[write], attributes={
        "budget.step.kind": "reconcile", "budget.step.name": "pay",
        "budget.reconcile.result": "Landed"})
    b.span("tool flaky", 41_000, 42_000, parent=other, t0_ns=t,
           exceptions=["", "ConnectionResetError"], attributes={
               "budget.step.kind": "tool", "budget.step.name": "flaky",
               "rpc.response.status_code": "UNAVAILABLE"})
    return b.finished()


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory, sample_backend: str) -> tuple[str, str]:
    """EDGE stored both ways: a DuckDB file with the sample and EDGE, and the backend with
    the sample and EDGE appended."""
    spans = edge_spans()
    path = tmp_path_factory.mktemp("edge") / "edge.duckdb"
    shutil.copy(ui.sample_db(tmp_path_factory), path)
    duck = open_db(path.parent, path.name)
    # budget.cap_ms "abc" is left out of its typed column with a counted reason
    store(duck, spans, expected_refusals=frozenset({"budget_not_a_number"}))
    duck.close()
    con = clickhouse.connect(sample_backend)
    assert load_requests(con, [encode_spans(spans)]) == len(spans)
    return str(path), sample_backend


def test_new_spans_rebuild_the_derivation(edge: tuple[str, str]) -> None:
    _, backend = edge
    con = clickhouse.connect(backend)
    assert clickhouse.ensure_derived(con) is True  # otel_traces grew since the last build
    assert clickhouse.ensure_derived(con) is False  # and is current now


def test_a_change_rebuilds_a_derivation_stored_before_it_could_be_measured_again(
        edge: tuple[str, str]) -> None:
    """A backend derived before a re-measure could read its tables back (no
    budgetscope_step_lifts: an older budgetscope built it) is rebuilt whole at its next change,
    and the CLI says which it did; the change after that is measured again."""
    _, backend = edge
    con = clickhouse.connect(backend)
    clickhouse.ensure_derived(con)
    con.command("DROP TABLE budgetscope_step_lifts")
    first = CliRunner().invoke(cli, ["--backend", backend, "budgets", "cap", "tool:never_seen",
                                     "3s"])
    assert "on the backend; derived tables rebuilt in " in first.output, first.output
    second = CliRunner().invoke(cli, ["--backend", backend, "budgets", "uncap",
                                      "tool:never_seen"])
    assert "on the backend; derived tables re-measured in " in second.output, second.output


@pytest.mark.parametrize("name", CLI_REPORTS)
def test_edge_reports_equal_to_duckdb(edge: tuple[str, str], name: str) -> None:
    db, backend = edge
    args = ["report", name]
    expected = invoke("--db", db, *args)
    assert invoke("--backend", backend, *args) == expected


def test_edge_runs_equal_to_duckdb(edge: tuple[str, str]) -> None:
    db, backend = edge
    con = clickhouse.connect(backend)
    clickhouse.ensure_derived(con)
    runs = reports.runs(con)
    run_ids = list(runs[runs["agent"].isin(["edge", "edge-svc"])]["run_id"])
    assert any("/" in run_id for run_id in run_ids), "the nested run has a trace/span id"
    assert len(run_ids) == 3
    for run_id in run_ids:
        assert invoke("--backend", backend, "run", run_id, "--width", "400") == \
            _as_read_from_backend(invoke("--db", db, "run", run_id, "--width", "400"), db,
                                  backend)
    duck = duckdb_connect(db, read_only=True)
    try:
        for run_id in run_ids:
            mine, theirs = load_run(con, run_id), load_run(duck, run_id)
            for part in ("steps", "writes"):
                got = getattr(mine, part).reset_index(drop=True)
                want = getattr(theirs, part).reset_index(drop=True)
                assert list(got.columns) == list(want.columns)
                pd.testing.assert_frame_equal(got.astype(object).where(got.notna(), None),
                                              want.astype(object).where(want.notna(), None),
                                              check_dtype=False)
        with pytest.raises(RunNotFound) as error:
            load_run(con, run_ids[0].split("/")[0] + "/" + "0" * 16)
        assert error.value.candidates
    finally:
        duck.close()


# ---- declared budgets (docs/guide.md#declaring-budgets) ------------------------------------------

# Every change on the backend rebuilds every derived table (docs/clickhouse.md), which is what
# these tests spend their time on (3 s a rebuild on the sample, quiet). So DuckDB takes every
# change through the CLI, and the backend all of them but one through the store's API first, as
# the command stores them (clickhouse_declared.apply; the listings compared below say they are
# the same declarations), then the last through `budgetscope --backend` (its message, DuckDB's
# with the rebuild, checked): that command's one rebuild derives from every declaration, which
# is what one rebuild per line proved. Every command of a kind runs the same on_clickhouse of
# budgets.py (store, rebuild, report); its message is DuckDB's (checked), whatever the line.
DECLARATIONS = [["set", "triage-agent", "45s"], ["set", "--default", "20s"],
                ["set", "research-agent", "7s"], ["set", "edge", "7s"],
                ["cap", "tool:fetch_report", "5s"],
                ["cap", "model:gpt-4o", "2500ms"], ["cap", "tool:never_seen", "1s"]]
# the backend's through the store API (the other, `set --default`, through its CLI)
DECLARED_THROUGH_STORE = {0: Change("set", "triage-agent", 45_000),
                          2: Change("set", "research-agent", 7_000),
                          3: Change("set", "edge", 7_000),
                          4: Change("cap", "tool:fetch_report", 5_000),
                          5: Change("cap", "model:gpt-4o", 2_500),
                          6: Change("cap", "tool:never_seen", 1_000)}
_REDERIVED = re.compile(r"; (\d+ runs? re-(derived|measured)"
                        r"|derived tables (rebuilt|re-measured)) in \d+\.\d\d s$")


def stored_on_backend(con: clickhouse.ClickHouseConnection,
                      change: Change | PriceChange) -> bool:
    """`change` stored on the backend as its `budgets` or `prices` command stores it, without
    the rebuild; whether anything changed."""
    room = clickhouse_prices if isinstance(change, PriceChange) else clickhouse_declared
    return room.apply(con, change).changed


def changed_on_both(db: str, backend: str, change: list[str]) -> None:
    """One change through the CLI on the DuckDB file and on the backend: the backend says what
    DuckDB says (its first line), that it did so on the backend, and what it did to the
    derived tables: rebuilt them when spans came since the last build, else measured them
    again."""
    duck = CliRunner().invoke(cli, ["--db", db, *change])
    assert duck.exit_code == 0, duck.output
    done = ("rebuilt" if clickhouse.derivation_due(clickhouse.connect(backend)) == "build"
            else "re-measured")
    shown = CliRunner().invoke(cli, ["--backend", backend, *change])
    assert shown.exit_code == 0, shown.output
    said = shown.output.splitlines()[0]
    assert f"on the backend; derived tables {done} in " in said, said
    assert _REDERIVED.sub("", said) == _REDERIVED.sub("", duck.output.splitlines()[0]) + \
        " on the backend", (said, duck.output)


def test_declared_budgets_equal_to_duckdb(edge: tuple[str, str], tmp_path: Path) -> None:
    """The same declarations on both backends (the sample and EDGE), through `budgetscope
    budgets` (DECLARED_THROUGH_STORE aside): every report, the step utilisation and the listing
    are the same bytes; undone, the backend derives what it derived before."""
    db, backend = edge
    copy = tmp_path / "declared.duckdb"
    shutil.copy(db, copy)
    con = clickhouse.connect(backend)
    before = invoke("--backend", backend, "report", "runs")
    try:
        for number, declaration in enumerate(DECLARATIONS):
            if number in DECLARED_THROUGH_STORE:
                invoke("--db", str(copy), "budgets", *declaration)
                assert stored_on_backend(con, DECLARED_THROUGH_STORE[number])
        for number, declaration in enumerate(DECLARATIONS):
            if number not in DECLARED_THROUGH_STORE:
                changed_on_both(str(copy), backend, ["budgets", *declaration])
        runs = invoke("--backend", backend, "report", "runs", "--format", "json")
        assert b'"declared"' in runs and before != invoke("--backend", backend, "report",
                                                           "runs")
        for name in CLI_REPORTS:
            assert invoke("--backend", backend, "report", name) == \
                invoke("--db", str(copy), "report", name), name
        duck = duckdb_connect(copy, read_only=True)
        try:
            for name in ("step_utilisation", "attribution_summary", "utilisation_histogram"):
                got = getattr(reports, name)(con, Filters())
                want = getattr(reports, name)(duck, Filters())
                assert to_csv_bytes(got) == to_csv_bytes(want), name
        finally:
            duck.close()
        listed = [{k: v for k, v in d.items() if k != "declared_at"} for d in json.loads(
            invoke("--backend", backend, "budgets", "list", "--format", "json"))]
        assert listed == [{k: v for k, v in d.items() if k != "declared_at"} for d in
                          json.loads(invoke("--db", str(copy), "budgets", "list", "--format",
                                            "json"))]
    finally:  # the module's later tests see the backend as it was: undone through the store,
        # the last through the CLI (its re-measure)
        for declaration in DECLARATIONS[:-1]:
            action = {"set": "unset", "cap": "uncap"}[declaration[0]]
            if declaration[1] == "--default":
                clickhouse_declared.apply(con, Change("unset_default"))
            else:
                clickhouse_declared.apply(con, Change(action, declaration[1]))
        removed = CliRunner().invoke(cli, ["--backend", backend, "budgets", "uncap",
                                           "tool:never_seen"])
    assert removed.output.startswith("cap of step 'tool:never_seen' removed on the backend; "
                                     "derived tables re-measured in "), removed.output
    assert invoke("--backend", backend, "budgets", "list", "--format", "json") == b"[]\n"
    assert invoke("--backend", backend, "report", "runs") == before


# ---- prices and token and dollar budgets (docs/metrics.md §11.3, §11.5) -------------------

PRICE_AND_BUDGET_CHANGES = [
    ["budgets", "set", "billing-agent", "--tokens", "40k", "--usd", "0.02"],
    ["budgets", "set", "--default", "60s", "--usd", "0.5", "--usd-per-week", "20"],
    ["budgets", "unset", "billing-agent", "--usd"],
    # the sample's models as their spans name them (gen_ai.response.model first)
    ["prices", "set", "gpt-4o-2024-08-06", "--provider", "openai", "--input", "2",
     "--output", "8", "--from", "2026-11-10"],
    ["prices", "set", "triage-distill-*", "--input", "0.4", "--output", "1.6",
     "--cache-read", "0.1"],
    ["prices", "set", "claude-*", "--input", "3.5", "--output", "14"],
]
# the backend's through the store API beforehand (as DECLARED_THROUGH_STORE), the last, a
# `prices set`, through its CLI (prices.py's on_clickhouse: its one rebuild derives from all
# six; its message is DuckDB's); `prices unset` through the CLI undoes (the same on_clickhouse).
# `budgets` commands on the backend, a dimension's unset among them, run the on_clickhouse of
# budgets.py that test_declared_budgets_equal_to_duckdb's `set --default` and `uncap` and
# test_cost_fleet_equal_to_duckdb's money `budgets set` run.
CHANGED_THROUGH_STORE = {
    0: Change("set", "billing-agent", tokens=40_000, usd_nano=20_000_000),
    1: Change("set_default", None, 60_000, usd_nano=500_000_000,
              usd_per_week_nano=20_000_000_000),
    2: Change("unset", "billing-agent", dimensions=("usd",)),
    3: PriceChange("set", "gpt-4o-2024-08-06", "openai", parse_from("2026-11-10"),
                   parse_rate("2"), parse_rate("8")),
    4: PriceChange("set", "triage-distill-*", "", None, parse_rate("0.4"), parse_rate("1.6"),
                   parse_rate("0.1"))}


def test_prices_and_cost_budgets_equal_to_duckdb(edge: tuple[str, str], tmp_path: Path) -> None:
    """The same `prices` and `budgets` changes on both backends (the sample and EDGE), through
    the CLI (CHANGED_THROUGH_STORE aside): the same listings, the same models without a price,
    and the same §11 rows after the rebuilds; undone afterwards, the backend derives what it
    derived before."""
    db, backend = edge
    copy = tmp_path / "priced.duckdb"
    shutil.copy(db, copy)
    con = clickhouse.connect(backend)
    before = invoke("--backend", backend, "report", "runs")
    try:
        for number, change in enumerate(PRICE_AND_BUDGET_CHANGES):
            if number in CHANGED_THROUGH_STORE:
                invoke("--db", str(copy), *change)
                assert stored_on_backend(con, CHANGED_THROUGH_STORE[number])
        for number, change in enumerate(PRICE_AND_BUDGET_CHANGES):
            if number not in CHANGED_THROUGH_STORE:
                changed_on_both(str(copy), backend, change)
        for listing in (["prices", "list", "--format", "json"],
                        ["budgets", "list", "--format", "json"]):
            got, want = (json.loads(invoke(*where, *listing)) for where in (
                ("--backend", backend), ("--db", str(copy))))
            assert _undated(got) == _undated(want), listing
        assert invoke("--backend", backend, "prices", "check") == \
            invoke("--db", str(copy), "prices", "check")
        duck = duckdb_connect(copy, read_only=True)
        try:
            for table in TABLES:
                want = _cost_rows(duck, table)
                got = _cost_rows(con, table)
                assert got == want, difference(got, want)
            sources = {row["cost_source"] for row in _cost_rows(duck, "metered_spans")}
            assert "override" in sources
        finally:
            duck.close()
    finally:  # the module's later tests see the backend as it was: undone through the store,
        # the last through the CLI (its re-measure)
        clickhouse_declared.apply(con, Change("unset", "billing-agent"))
        clickhouse_declared.apply(con, Change("unset_default"))
        for stored in (CHANGED_THROUGH_STORE[3], CHANGED_THROUGH_STORE[4]):
            clickhouse_prices.apply(con, PriceChange("unset", stored.model, stored.provider,
                                                     stored.from_ns))
        removed = CliRunner().invoke(cli, ["--backend", backend, "prices", "unset", "claude-*"])
    assert removed.output.startswith("price of 'claude-*' removed on the backend; derived "
                                     "tables re-measured in "), removed.output
    assert json.loads(invoke("--backend", backend, "prices", "list", "--format",
                             "json"))["overrides"] == []
    assert invoke("--backend", backend, "budgets", "list", "--format", "json") == b"[]\n"
    assert invoke("--backend", backend, "report", "runs") == before


def _undated(found: object) -> object:
    """A listing without its declared_at stamps (each backend's own clock)."""
    if isinstance(found, dict):
        return {k: _undated(v) for k, v in found.items() if k != "declared_at"}
    if isinstance(found, list):
        return [_undated(v) for v in found]
    return found


# ---- tokens and dollars (docs/metrics.md §11) ----------------------------------------------

def test_cost_fleet_equal_to_duckdb(edge: tuple[str, str], tmp_path: Path) -> None:
    """The hand-worked cost fleet (tests/support/cost_fleet.py) stored both ways, with its
    declarations and price through `budgetscope` on each: every report and every run's cost
    block are the same bytes. Last in the module: it adds the fleet to the backend."""
    db, backend = edge
    copy = tmp_path / "cost.duckdb"
    shutil.copy(db, copy)
    spans, ids = cost_fleet_spans()
    duck = open_db(copy.parent, copy.name)
    try:
        store(duck, spans)
    finally:
        duck.close()
    con = clickhouse.connect(backend)
    assert load_requests(con, [encode_spans(spans)]) == len(spans)
    # the backend's last two through the store, then the first (a budget in dollars) through
    # the CLI: one rebuild for the new spans and the three (as DECLARED_THROUGH_STORE)
    first, *stored = COST_DECLARATIONS
    for declaration, change in zip(stored, COST_CHANGES[1:], strict=True):
        invoke("--db", str(copy), *declaration)
        assert stored_on_backend(con, change)
    changed_on_both(str(copy), backend, first)
    for name in CLI_REPORTS:
        assert invoke("--backend", backend, "report", name) == \
            invoke("--db", str(copy), "report", name), name
    tokens = ["report", "cost-attribution", "--dimension", "tokens"]
    assert invoke("--backend", backend, *tokens) == invoke("--db", str(copy), *tokens)
    for run_id in ids.values():
        assert invoke("--backend", backend, "run", run_id) == \
            invoke("--db", str(copy), "run", run_id)
