"""The conventions' traces (tests/support/convention_traces.py) through
the ClickHouse derivation (chdb, in-process) give the same steps and runs, row for row, as
through DuckDB's: recognition, names, conventions, levels, classes, consumption, agents."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from bench.support.clickhouse_load.traces import arrow_batches, load_requests
from store import (
    Change,
    PriceChange,
    apply,
    apply_price,
    clickhouse,
    clickhouse_declared,
    clickhouse_prices,
    derive_now,
    parse_from,
    parse_rate,
)
from tests.support.convention_traces import (
    call_traces,
    finished_spans,
    recognised_traces,
    revised_traces,
    roll_up_trace,
    text_trace,
)
from tests.support.cost_parity import (
    RUN_COST_COLUMNS,
    STEP_COST_COLUMNS,
    TABLES,
    Scenario,
    derive_on_clickhouse,
    difference,
    record_cost_tests,
    snapshot,
    tidy,
)
from tests.support.paths import REPO
from tests.support.real_fixture_compare import FIXTURES, ingest
from tests.support.trace_builder import TraceBuilder, open_db, store

# slow, left out of make test-fast: the convention traces in ClickHouse (chdb) and DuckDB, 10 s.
pytestmark = pytest.mark.slow

CHAT = {"gen_ai.operation.name": "chat"}

STEP_COLUMNS = ["run_id", "trace_id", "span_id", "parent_span_id", "top_step_id",
                "is_top_level", "step_level", "span_name", "kind", "name", "step_key",
                "convention", "class", "start_ns", "end_ns", "consumption_ms", "agent"]
RUN_COLUMNS = ["run_id", "trace_id", "span_id", "agent", "budget_ms", "exhausted",
               "steps", "top_level_steps", "unattributed_ms", "culprit_span_id",
               "culprit_key", "culprit_ms", "holder_span_id", "holder_key", "culprit_step",
               "holder_step", "holder_at_deadline", "root_missing", "start_ns"]
# and docs/metrics.md §11's (tokens, dollars, their budgets, refusals by budget)
STEP_COLUMNS += [column for column in STEP_COST_COLUMNS if column not in STEP_COLUMNS]
RUN_COLUMNS += [column for column in RUN_COST_COLUMNS if column not in RUN_COLUMNS]


def _spans() -> list:
    spans = []
    builders: list[TraceBuilder] = [recognised_traces()[0], roll_up_trace()[0],
                                    text_trace()[0], revised_traces()[0]]
    for builder in builders:
        spans.extend(builder.finished())
    # the calls' traces without the spans that never arrive (a lost parent, a rootless root)
    spans.extend(finished_spans(*call_traces()))
    return spans


def _tidy(frame: pd.DataFrame, key: list[str]) -> list[dict]:
    return tidy(frame, key)  # lists (unpriced_models) as lists


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):
    """One chdb folder for the module (chdb allows one per process): its URL."""
    folder = tmp_path_factory.mktemp("parity_chdb") / "data"
    yield f"chdb://{folder}"
    clickhouse.close_all()
    shutil.rmtree(Path(folder), ignore_errors=True)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, backend):
    spans = _spans()
    duck = open_db(tmp_path_factory.mktemp("parity_duck"))
    # traces whose root never arrives measured at once, as ClickHouse does for spans older
    # than the grace period (these are from 2026-11-23)
    store(duck, spans, roots_overdue=True)
    con = clickhouse.connect(backend)
    assert load_requests(con, [encode_spans(spans)]) == len(spans)
    clickhouse.ensure_derived(con)
    yield duck, con
    duck.close()


def test_steps_equal(both) -> None:
    duck, con = both
    columns = ", ".join(STEP_COLUMNS)
    want = duck.execute(f"SELECT {columns} FROM steps").df()
    got = con.frame_text(f"SELECT {columns} FROM budgetscope_steps", {})
    assert len(want) > 60
    assert _tidy(got, ["run_id", "span_id"]) == _tidy(want, ["run_id", "span_id"])


def test_runs_equal(both) -> None:
    duck, con = both
    columns = ", ".join(RUN_COLUMNS)
    want = duck.execute(f"SELECT {columns} FROM runs").df()
    got = con.frame_text(f"SELECT {columns} FROM budgetscope_runs", {})
    assert _tidy(got, ["run_id"]) == _tidy(want, ["run_id"])


# Declarations and a price changed after a build (the spans not): a budget for an agent whose
# runs had none, the default in time, tokens and dollars, caps on a tool and a model (whose
# tools are lifted out of it), a price for the traces' unpriced model.
REMEASURED = (Change("set", "elsewhere", 4_000),
              Change("set_default", None, 20_000, tokens=5_000, usd_nano=1_000_000),
              Change("cap", "tool:t", 300), Change("cap", "model:gpt-x", 2_000),
              PriceChange("set", "gpt-x", "", None, parse_rate("2"), parse_rate("8")))
UNDONE = (Change("unset", "elsewhere"), Change("unset_default"), Change("uncap", "tool:t"),
          Change("uncap", "model:gpt-x"), PriceChange("unset", "gpt-x", "", None))
# every table a build or a re-measure writes
DERIVED_TABLES = ("budgetscope_runs", "budgetscope_steps", "budgetscope_metered_spans",
                  "budgetscope_reconcile_links", "budgetscope_write_steps",
                  "budgetscope_derivation_notes", "budgetscope_own_budgets",
                  "budgetscope_step_lifts")


def _changed(duck: duckdb.DuckDBPyConnection, con: clickhouse.ClickHouseConnection,
             changes: tuple[Change | PriceChange, ...]) -> None:
    """`changes` stored on both engines, as their `budgets` and `prices` commands store them;
    DuckDB derives what they move."""
    for change in changes:
        if isinstance(change, PriceChange):
            apply_price(duck, change)
            clickhouse_prices.apply(con, change)
        else:
            apply(duck, change)
            clickhouse_declared.apply(con, change)
    derive_now(duck)


def _derived(con: clickhouse.ClickHouseConnection) -> dict[str, tuple[str, str]]:
    """Each derived table's column types and rows, as ClickHouse writes them out (TSV)."""
    return {table: (con.frame_text(f"SELECT name, type FROM system.columns WHERE database = "
                                   f"currentDatabase() AND table = '{table}' ORDER BY position",
                                   {}).to_csv(index=False),
                    con.frame_text(f"SELECT * APPLY toString FROM {table} ORDER BY ALL",
                                   {}).to_csv(index=False))
            for table in DERIVED_TABLES}


def test_declarations_and_prices_remeasure_as_a_whole_build(both) -> None:
    """Declarations and a price changed, the spans not: ClickHouse measures its stored runs,
    steps and metered spans again (derive_remeasure.sql) instead of building from
    otel_traces, and derives what a whole build derives, byte for byte (every derived table,
    its column types included) and what DuckDB derives (its runs and steps)."""
    duck, con = both
    assert con.scalar("SELECT count() FROM budgetscope_step_lifts") > 0  # holes measured
    try:
        _changed(duck, con, REMEASURED)
        assert clickhouse.derivation_due(con) == "remeasure"
        assert clickhouse.ensure_derived(con) is True
        assert clickhouse.derivation_due(con) is None
        remeasured = _derived(con)
        assert con.scalar(SCRATCH_TABLES) == 0
        test_steps_equal(both)
        test_runs_equal(both)
        assert con.scalar("SELECT countIf(budget_source = 'declared') FROM budgetscope_runs") \
            > 0
        assert clickhouse.ensure_derived(con, force=True) is True
        rebuilt = _derived(con)
        for table in DERIVED_TABLES:
            assert remeasured[table] == rebuilt[table], table
    finally:  # the module's later tests see the backend as it was
        _changed(duck, con, UNDONE)
        clickhouse.ensure_derived(con)


# ---- docs/metrics.md §11: the cost tests' spans ---------------------------------------------

# every cost test file (of docs/metrics.md §11's rules and prices), in whichever wing of tests/
# it tests (the derivation's in store/, the reports' in queries/, the CLI's in cli/)
COST_TESTS = [str(path.relative_to(REPO)) for path in
              sorted((REPO / "tests").rglob("test_cost_*.py"), key=lambda path: path.name)]


@pytest.fixture(scope="module")
def cost_scenarios(tmp_path_factory: pytest.TempPathFactory, backend,
                   request: pytest.FixtureRequest):
    """Every test of COST_TESTS that stores spans run on DuckDB (by pytest: as this run ran it,
    or again apart; the recorder leaves out those whose module cannot store), its spans built
    again on ClickHouse (the backend's otel_traces replaced: the tests above have read
    theirs)."""
    scenarios = record_cost_tests(COST_TESTS, tmp_path_factory.mktemp("cost_duck"),
                                  request.session)
    return scenarios, derive_on_clickhouse(clickhouse.connect(backend), scenarios)


@pytest.mark.parametrize("table", ["runs", "steps", "metered_spans", "notes"])
def test_cost_rows_equal(cost_scenarios, table: str) -> None:
    """Each cost test's runs, steps, metered spans and notes, column for column."""
    scenarios, compared = cost_scenarios
    assert len(scenarios) > 40
    key = TABLES[table][3]
    differ = {name: difference(tidy(got, key), tidy(want, key))
              for name, pair in compared.items() for want, got in [pair[table]]
              if tidy(got, key) != tidy(want, key)}
    assert not differ, f"{len(differ)} of {len(compared)} differ: {differ}"


def test_real_fixtures_cost_rows_equal(tmp_path: Path, backend) -> None:
    """The real instrumentations' fixtures (tests/real_fixtures, with the usage their fake
    servers returned) ingested into DuckDB and written as the exporter writes them: the same
    runs, steps, metered spans and notes. All of them in one DuckDB file, as in the one
    ClickHouse build: one `ingest` of the 20 files took 1.2 s where one file apiece took 15.3 s
    (load 6.5)."""
    paths = sorted((FIXTURES / "otlp").glob("*.otlp.pb"))
    assert len(paths) > 10
    db = tmp_path / "real.duckdb"
    ingest(paths, db)
    with duckdb.connect(str(db), read_only=True) as con:
        rows, settings = snapshot(con)
    compared = derive_on_clickhouse(clickhouse.connect(backend), [
        Scenario("tests/real_fixtures/otlp", [], settings, rows, tuple(paths))])
    for table, (want, got) in compared["tests/real_fixtures/otlp"].items():
        key = TABLES[table][3]
        assert tidy(got, key) == tidy(want, key), f"{table}: " + difference(
            tidy(got, key), tidy(want, key))
    pair = compared["tests/real_fixtures/otlp"]
    assert len(pair["steps"][0]) > 50
    assert len(pair["metered_spans"][0]) > 100
    runs = set(rows["runs"]["trace_id"])
    for path in paths:  # every file is in it, with its runs
        traces = {t for batch in arrow_batches([path]) for t in batch["TraceId"].to_pylist()}
        assert traces & runs, path.name


def test_declared_and_priced_cost_rows_equal(tmp_path: Path, backend) -> None:
    """Token and dollar budgets declared per agent and by default, and prices set (exact, a
    prefix for one provider, one from a date on, cache rates given or not) beside the bundled
    table and reported costs: the same rows on both engines."""
    day_ms = 86_400_000
    b = TraceBuilder(seed=77, service="pricing-svc")
    usage = {"gen_ai.usage.input_tokens": 1_000, "gen_ai.usage.output_tokens": 200}
    for index, agent in enumerate(("acme-agent", "other-agent", "acme-agent")):
        start = index * 2 * day_ms  # 2026-11-23, -25 and -27: before and after the dated price
        run = b.span("agent run", start, start + 9_000, attributes={"gen_ai.agent.name": agent})
        b.span(f"chat acme {index}", start, start + 1_000, parent=run, attributes={
            **CHAT, "gen_ai.request.model": "ACME-7b", **usage})
        b.span(f"chat tuned {index}", start + 1_000, start + 2_000, parent=run, attributes={
            **CHAT, "gen_ai.request.model": "ft:gpt-4o-mini:acme:x1",
            "gen_ai.provider.name": "openai", **usage,
            "gen_ai.usage.cache_read.input_tokens": 600})
        b.span(f"chat tuned elsewhere {index}", start + 2_000, start + 3_000, parent=run,
               attributes={**CHAT, "gen_ai.request.model": "ft:gpt-4o-mini:acme:x1",
                           "gen_ai.provider.name": "azure", **usage})
        b.span(f"chat bundled {index}", start + 3_000, start + 4_000, parent=run, attributes={
            **CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai",
            **usage})
        b.step(run, "tool", f"paid {index}", start + 4_000, start + 5_000,
               **{"budget.cost_usd": "0.0004"})
    duck = open_db(tmp_path)
    try:
        store(duck, b.finished())
        for change in (Change("set", "acme-agent", None, tokens=2_500, usd_nano=3_000_000),
                       Change("set_default", None, 30_000, tokens=1_000_000,
                              usd_nano=500_000_000)):
            apply(duck, change)
        for change in (
                PriceChange("set", "acme-7b", "", None, parse_rate("1"), parse_rate("2")),
                PriceChange("set", "acme-7b", "", parse_from("2026-11-24"), parse_rate("1.5"),
                            parse_rate("3")),
                PriceChange("set", "ft:gpt-4o-mini:acme:*", "openai", None, parse_rate("0.3"),
                            parse_rate("1.2"), parse_rate("0.15")),
                PriceChange("set", "ft:gpt-4o-mini:*", "", None, parse_rate("0.35"),
                            parse_rate("1.4"))):
            apply_price(duck, change)
        derive_now(duck)
        rows, settings = snapshot(duck)
    finally:
        duck.close()
    assert set(rows["metered_spans"]["cost_source"]) == {"override", "bundled", "reported"}
    assert set(rows["runs"]["usd_budget_source"]) == {"declared"}
    compared = derive_on_clickhouse(clickhouse.connect(backend), [Scenario("declared", [
        encode_spans(b.finished()).SerializeToString()], settings, rows)])
    for table, (want, got) in compared["declared"].items():
        key = TABLES[table][3]
        assert tidy(got, key) == tidy(want, key), difference(tidy(got, key), tidy(want, key))


SCRATCH_TABLES = ("SELECT count() FROM system.tables WHERE database = currentDatabase() "
                  "AND name LIKE 'budgetscope\\\\_tmp\\\\_%'")
READ = {key: f"SELECT {', '.join(columns)} FROM {table}"
        for key, (_, table, columns, _) in TABLES.items()}


@dataclass
class Restarted:
    """What test_a_new_bundled_version_prices_every_run_again and
    test_a_build_that_died_midway_leaves_nothing_the_next_trips_on read of one backend: built,
    then as an upgrade and a crash leave it, then opened by the next process, which builds."""

    priced: int  # the chat span's cost as first built
    want: dict[str, list[dict]]  # TABLES' rows as first built
    left: int  # the dead build's scratch tables, as it left them
    spans_left: int  # rows in its scratch spans table, as it left them
    reopened_left: int  # its scratch tables, as the next process finds them
    reopened_spans: int  # and the rows in its scratch spans table then
    due: str | None  # what the next process's reader found to do
    built: bool  # whether it derived
    version: str  # the version recorded after that build
    matches: str  # gpt-4o's bundled matches after it
    cost: int  # the chat span's cost after it
    scratch_after: int  # scratch tables left after it
    got: dict[str, list[dict]]  # TABLES' rows after it
    built_again: bool  # whether the reader after that built again


@pytest.fixture(scope="module")
def restarted(backend) -> Restarted:
    """One backend as two faults leave it, and the next process's one build over both (each a
    rebuild after a restart, 4 s under CI: one proves what the two proved apart). An installed
    genai-prices other than the one the backend's matches came from (an upgrade), and a build
    whose process died midway (no `finally` ran): its scratch tables, Memory tables, are left
    behind. The next process's reader sees the other version, so it derives without being
    forced (a re-measure: the spans are as the first build read them); it must forget the old
    matches, drop the scratch tables first, and derive what the first whole build derived."""
    con = clickhouse.connect(backend)
    con.command("TRUNCATE TABLE IF EXISTS otel_traces")
    b = TraceBuilder(seed=91)
    run = b.run(0, 1_000, None)
    b.span("chat", 0, 900, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 1_000, "gen_ai.usage.output_tokens": 100})
    load_requests(con, [encode_spans(b.finished())])
    clickhouse.ensure_derived(con)
    priced = con.scalar("SELECT any(cost_nano) FROM budgetscope_metered_spans")
    want = {key: tidy(con.frame_text(text, {}), TABLES[key][3]) for key, text in READ.items()}
    # as if the backend had been built and matched by genai-prices 0.0.1
    con.command("TRUNCATE TABLE budgetscope_meta")
    con.command("INSERT INTO budgetscope_meta VALUES ('genai_prices_version', '0.0.1')")
    con.command("ALTER TABLE budgetscope_derive_state UPDATE prices = "
                "replaceRegexpOne(prices, '/[^/]*$', '/0.0.1') WHERE true "
                "SETTINGS mutations_sync = 2")
    con.command("INSERT INTO budgetscope_price_matches (model_ref, provider, bundled_ref) "
                "VALUES ('gpt-4o', 'openai', 'openai/gpt-4o-by-an-old-table')")
    # a build's first files, as ensure_derived runs them, and no more (the files before the
    # price matching: the old table's match stays as the upgrade left it)
    con.run_script("derive_scratch_drop")
    con.run_script("derive_log_exceptions_none")
    con.run_script("derive_build", {"root_cutoff_ns": time.time_ns()})
    con.run_script("derive_walk")
    left = con.scalar(SCRATCH_TABLES)
    spans_left = con.scalar("SELECT count() FROM budgetscope_tmp_spans")
    clickhouse.close_all()  # the process is gone; the next one opens the folder
    con = clickhouse.connect(backend)
    reopened_left = con.scalar(SCRATCH_TABLES)
    reopened_spans = con.scalar("SELECT count() FROM budgetscope_tmp_spans")
    due = clickhouse.derivation_due(con)
    built = clickhouse.ensure_derived(con)
    return Restarted(
        priced, want, left, spans_left, reopened_left, reopened_spans, due, built,
        con.scalar("SELECT any(value) FROM budgetscope_meta"),
        con.scalar("SELECT arrayStringConcat(groupArray(bundled_ref), ' ') "
                   "FROM budgetscope_price_matches WHERE model_ref = 'gpt-4o'"),
        con.scalar("SELECT any(cost_nano) FROM budgetscope_metered_spans"),
        con.scalar(SCRATCH_TABLES),
        {key: tidy(con.frame_text(text, {}), TABLES[key][3]) for key, text in READ.items()},
        clickhouse.ensure_derived(con))


def test_a_new_bundled_version_prices_every_run_again(restarted: Restarted) -> None:
    """Another installed genai-prices than the one the backend's matches came from (a new
    process after an upgrade): the matches are forgotten, the next reader re-measures (the
    spans are unchanged), and every pair is matched again by the installed version."""
    assert restarted.priced == 3_500_000  # 1000 × $2.50 + 100 × $10 per million
    assert restarted.due == "remeasure"
    assert restarted.built is True  # not forced: the version recorded is not the installed one
    assert restarted.version == clickhouse.prices.installed_version()
    assert restarted.matches == "openai/gpt-4o"  # the old table's match forgotten, matched again
    assert restarted.cost == restarted.priced
    assert restarted.built_again is False


def test_a_build_that_died_midway_leaves_nothing_the_next_trips_on(restarted: Restarted
                                                                   ) -> None:
    """A build whose process died midway (no `finally` ran) leaves its scratch tables behind:
    Memory tables, found again empty by the next process. Its derivation (a re-measure) drops
    them first and derives what a whole build derives; none is left after it."""
    assert restarted.left > 10
    assert restarted.spans_left > 0
    assert restarted.reopened_left == restarted.left
    assert restarted.reopened_spans == 0  # in memory, gone
    assert restarted.built is True
    assert restarted.scratch_after == 0
    for key in TABLES:
        assert restarted.got[key] == restarted.want[key], difference(restarted.got[key],
                                                                     restarted.want[key])
