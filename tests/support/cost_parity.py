"""The cost tests' spans through both derivations (tests/clickhouse/test_conventions_parity.py).

Every test of tests/*/test_cost_*.py stores its hand-built spans with trace_builder.store and
then checks DuckDB's numbers. The plugin tests/support/cost_recorder.py keeps what each test
stored and the §11 rows its DuckDB file derived, with what it declared or priced (a
`Scenario`): `record_cost_tests` reads what it recorded as the suite's run ran those tests, or
runs those test files again with pytest, as the suite does, and the plugin.
`derive_on_clickhouse` then writes the scenarios' spans as the Collector's exporter would into
one chdb backend, with the same declarations and prices, builds it, and returns its rows
beside the DuckDB file's, for the test to compare row for row.

The tests reuse trace ids (each builds its own seeded ids), so each scenario's trace ids are
renamed on the way into ClickHouse (md5 of its number and the id), and the DuckDB rows with
them; scenarios that declared or priced differently are built apart.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.support.clickhouse_load.traces import (
    TABLE,
    arrow_batches,
    create_otel_traces,
    table_of_request,
)
from store import clickhouse
from tests.support.paths import REPO

# docs/metrics.md §11's columns of runs and steps (store/file/schema/derived.sql), and those
# of §4 that the cost derivation changed (time exhaustion, refusals).
RUN_COST_COLUMNS = [
    "run_id", "trace_id", "span_id", "agent", "exhausted", "refused_steps", "tokens",
    "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
    "reasoning_tokens", "cost_nano", "cost_complete", "unpriced_steps", "unmetered_steps",
    "unmetered_billable_steps", "unpriced_models", "unattributed_cost_nano",
    "unattributed_tokens", "reported_total_nano", "exhausted_by", "usd_budget_nano",
    "usd_budget_source", "token_budget", "token_budget_source", "cost_utilisation",
    "token_utilisation", "usd_exhausted", "tokens_exhausted", "cost_culprit_span_id",
    "cost_culprit_key", "cost_culprit_step", "cost_culprit_nano", "cost_culprit_share",
    "cost_crosser_span_id", "cost_crosser_key", "cost_crosser_step",
    "cost_before_crossing_nano", "cost_after_crossing_nano", "overrun_usd_nano",
    "token_culprit_span_id", "token_culprit_key", "token_culprit_step", "token_culprit_tokens",
    "token_culprit_share", "token_crosser_span_id", "token_crosser_key", "token_crosser_step",
    "tokens_before_crossing", "tokens_after_crossing", "overrun_tokens"]
STEP_COST_COLUMNS = [
    "run_id", "trace_id", "span_id", "top_step_id", "is_top_level", "step_key", "class",
    "run_exhausted", "input_tokens", "cache_read_tokens", "cache_write_tokens",
    "output_tokens", "reasoning_tokens", "tokens", "cost_nano", "cost_complete", "cost_source",
    "unmetered", "possibly_billed", "refused_by", "consumption_usd_nano", "consumption_tokens",
    "cost_share", "token_share"]
METERED_COLUMNS = [
    "run_id", "trace_id", "span_id", "top_step_id", "step_span_id", "steps_above",
    "is_metered", "depth", "start_ns", "end_ns", "model", "provider", "model_ref",
    "input_tokens", "fresh_input_tokens", "cache_read_tokens", "cache_write_tokens",
    "output_tokens", "reasoning_tokens", "tokens", "reported_nano", "cost_nano", "cost_source",
    "price_ref", "agent", "run_start_ns"]
NOTE_COLUMNS = ["trace_id", "note", "detail"]
TABLES = {"runs": ("runs", "budgetscope_runs", RUN_COST_COLUMNS, ["run_id"]),
          "steps": ("steps", "budgetscope_steps", STEP_COST_COLUMNS, ["run_id", "span_id"]),
          "metered_spans": ("metered_spans", "budgetscope_metered_spans", METERED_COLUMNS,
                            ["run_id", "trace_id", "span_id"]),
          "notes": ("derivation_notes", "budgetscope_derivation_notes", NOTE_COLUMNS,
                    ["trace_id", "note"])}
# What a file declared or priced, which a ClickHouse backend is given too.
DECLARED_BUDGETS = ("scope", "agent", "budget_ms", "tokens", "usd_nano", "usd_per_week_nano")
STEP_CAPS = ("step_key", "cap_ms")
PRICE_OVERRIDES = ("model_pattern", "provider", "from_ns", "input_rate", "output_rate",
                   "cache_read_rate", "cache_write_rate")
SETTINGS = (("declared_budgets", DECLARED_BUDGETS), ("declared_step_caps", STEP_CAPS),
            ("price_overrides", PRICE_OVERRIDES))


@dataclass
class Scenario:
    """One cost test (one parametrization): the spans it stored, what it declared and priced,
    and the rows its DuckDB file derived from them."""

    name: str
    requests: list[bytes]  # each `store` call's spans, as a serialized OTLP request
    settings: tuple[tuple[Any, ...], ...]  # declared budgets, caps, prices (SETTINGS)
    rows: dict[str, pd.DataFrame]  # TABLES' rows in the DuckDB file
    files: tuple[Path, ...] = ()  # or trace files that were ingested (ingest's loader)


def snapshot(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The §11 rows of a file, and what was declared and priced in it."""
    rows = {}
    for key, (table, _, columns, _) in TABLES.items():
        where = " WHERE note = 'usage_values_ignored'" if key == "notes" else ""
        rows[key] = con.execute(f"SELECT {', '.join(columns)} FROM {table}{where}").df()
    settings = tuple(tuple(con.execute(
        f"SELECT {', '.join(columns)} FROM {table} ORDER BY ALL").fetchall())
        for table, columns in SETTINGS)
    return rows, settings


def record_cost_tests(files: Iterable[str], folder: Path,
                      session: pytest.Session | None = None) -> list[Scenario]:
    """The scenarios of the tests of `files` that passed and stored spans: as this run recorded
    them (`session`, tests/support/cost_recorder.py) for each file whose every test that can
    record ran in it and passed, and for the other files by running them again with pytest and
    the recording plugin."""
    files = list(files)
    recorded: list[Path] = []
    if session is not None:
        whole, recorded = _recorded_in_run(session, files)
        files = [name for name in files if name not in whole]
    if files:
        recorded += _record_apart(files, folder)
    scenarios = []
    for path in sorted(recorded):
        with path.open("rb") as pickled:
            found = pickle.load(pickled)
        scenarios.append(Scenario(found["name"], found["requests"], found["settings"],
                                  found["rows"]))
    return scenarios


def _record_apart(files: list[str], folder: Path) -> list[Path]:
    """Run the test files with pytest and the recording plugin; its recordings."""
    from tests.support.cost_recorder import RECORD_ENV

    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.support.cost_recorder", *files],
        cwd=REPO, env={**os.environ, RECORD_ENV: str(folder)}, capture_output=True, text=True,
        check=False)
    # 5: no test ran, as when none of the files' tests can record (the CLI's, the reports')
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    return list(folder.glob("*.pickle"))


# How long the parity test waits, under xdist, for another worker's cost tests to finish
# recording once none has finished: it never waits on a quiet worker, and a file queued behind
# it on its own worker is recorded apart instead.
RECORDING_IDLE_S = 60.0


def _recorded_in_run(session: pytest.Session, files: list[str]) -> tuple[set[str], list[Path]]:
    """The files whose recordings in this run are whole (each of their tests that can record
    ran, every phase passed: what the subprocess of _record_apart would have asserted), and
    those tests' recordings. A file with a test deselected, or none in the run, is not whole."""
    from tests.support import cost_recorder

    expected: dict[str, list[str]] = {name: [] for name in files}
    for item in session.items:
        name = str(Path(str(item.path)).relative_to(REPO))
        if name in expected and cost_recorder.records_in_run(item):
            expected[name].append(item.nodeid)
    partial = {str(Path(path).relative_to(REPO)) for path in
               cost_recorder.partial_files(session.config)}
    folder = cost_recorder.run_folder(session.config)
    wanted = {name for name, ids in expected.items() if ids and name not in partial}
    outcomes = _outcomes(folder, {i for name in wanted for i in expected[name]},
                         wait=bool(os.environ.get("PYTEST_XDIST_WORKER")))
    whole = {name for name in wanted
             if all(outcomes.get(nodeid) == "passed" for nodeid in expected[name])}
    # a file none of whose tests can record (the CLI's, the reports') records nothing apart
    whole |= {name for name, ids in expected.items() if not ids and name not in partial
              and any(Path(str(item.path)).relative_to(REPO) == Path(name)
                      for item in session.items)}
    recordings = [folder / f"{cost_recorder.file_name(nodeid)}.pickle"
                  for name in whole for nodeid in expected[name]]
    return whole, [path for path in recordings if path.exists()]


def _outcomes(folder: Path, nodeids: set[str], wait: bool) -> dict[str, str]:
    """The outcomes the tests `nodeids` left in `folder`; with `wait`, once all are there or
    none has come for RECORDING_IDLE_S."""
    from tests.support.cost_recorder import file_name

    found: dict[str, str] = {}
    last = time.monotonic()
    while True:
        for nodeid in nodeids - found.keys():
            path = folder / f"{file_name(nodeid)}.outcome"
            if path.exists():
                found[nodeid] = path.read_text()
                last = time.monotonic()
        if not wait or found.keys() >= nodeids or time.monotonic() - last > RECORDING_IDLE_S:
            return found
        time.sleep(0.2)


def _renamed(trace_id: str, number: int) -> str:
    return hashlib.md5(f"{number}/{trace_id}".encode()).hexdigest()


def _rename_frame(frame: pd.DataFrame, mapping: dict[str, str]) -> pd.DataFrame:
    """Trace ids (and the run ids made of them) of a scenario's rows, renamed."""
    frame = frame.copy()
    if "trace_id" in frame:
        frame["trace_id"] = frame["trace_id"].map(lambda t: mapping.get(t, t))
    if "run_id" in frame:
        frame["run_id"] = frame["run_id"].map(
            lambda r: "/".join([mapping.get(r.split("/")[0], r.split("/")[0]),
                                *r.split("/")[1:]]))
    return frame


def _rename_table(table: pa.Table, mapping: dict[str, str]) -> pa.Table:
    def renamed(column: pa.ChunkedArray) -> pa.Array:
        return pa.array([mapping.get(v, v) for v in column.to_pylist()], pa.string())

    table = table.set_column(table.schema.get_field_index("TraceId"), "TraceId",
                             renamed(table["TraceId"]))
    links = [[mapping.get(t, t) for t in ids] for ids in table["Links.TraceId"].to_pylist()]
    return table.set_column(table.schema.get_field_index("Links.TraceId"), "Links.TraceId",
                            pa.array(links, pa.list_(pa.string())))


def _declare(con: clickhouse.ClickHouseConnection, settings: tuple[Any, ...]) -> None:
    budgets, caps, overrides = settings
    for table in ("budgetscope_declared_budgets", "budgetscope_declared_step_caps",
                  "budgetscope_price_overrides"):
        con.command(f"TRUNCATE TABLE {table}")
    for row in budgets:
        con.command("INSERT INTO budgetscope_declared_budgets (scope, agent, budget_ms, tokens, "
                    "usd_nano, usd_per_week_nano, declared_at) VALUES ({scope:String}, "
                    "{agent:String}, {budget_ms:Nullable(Int64)}, {tokens:Nullable(Int64)}, "
                    "{usd_nano:Nullable(Int64)}, {usd_per_week_nano:Nullable(Int64)}, now64(3))",
                    dict(zip(DECLARED_BUDGETS, row, strict=True)))
    for row in caps:
        con.command("INSERT INTO budgetscope_declared_step_caps (step_key, cap_ms, declared_at) "
                    "VALUES ({step_key:String}, {cap_ms:Int64}, now64(3))",
                    dict(zip(STEP_CAPS, row, strict=True)))
    for row in overrides:
        con.command("INSERT INTO budgetscope_price_overrides (model_pattern, provider, from_ns, "
                    "input_rate, output_rate, cache_read_rate, cache_write_rate, declared_at) "
                    "VALUES ({model_pattern:String}, {provider:String}, "
                    "{from_ns:Nullable(Int64)}, {input_rate:Int64}, {output_rate:Int64}, "
                    "{cache_read_rate:Nullable(Int64)}, {cache_write_rate:Nullable(Int64)}, "
                    "now64(3))", dict(zip(PRICE_OVERRIDES, row, strict=True)))


def derive_on_clickhouse(con: clickhouse.ClickHouseConnection, scenarios: list[Scenario]
                         ) -> dict[str, dict[str, tuple[pd.DataFrame, pd.DataFrame]]]:
    """Each scenario's rows as DuckDB derived them and as ClickHouse does, with its trace ids
    renamed as in ClickHouse: {scenario: {table: (duckdb, clickhouse)}}."""
    create_otel_traces(con)
    from store import clickhouse_declared

    clickhouse_declared.declarations(con)  # the declared tables, as a `budgets` command makes
    clickhouse.prices.prepare(con)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for number, scenario in enumerate(scenarios):
        groups.setdefault(scenario.settings, []).append(number)
    compared: dict[str, dict[str, tuple[pd.DataFrame, pd.DataFrame]]] = {}
    for settings, numbers in groups.items():
        con.command(f"TRUNCATE TABLE {TABLE}")
        _declare(con, settings)
        mappings = {}
        for number in numbers:
            tables = [table_of_request(ExportTraceServiceRequest.FromString(request))
                      for request in scenarios[number].requests]
            tables += list(arrow_batches(scenarios[number].files))
            mapping = {t: _renamed(t, number) for table in tables
                       for t in table["TraceId"].to_pylist()}
            mappings[number] = mapping
            for table in tables:
                con.insert_arrow(TABLE, _rename_table(table, mapping))
        clickhouse.ensure_derived(con, force=True)
        built = {key: con.frame_text(
            f"SELECT {', '.join(columns)} FROM {table}"
            + (" WHERE note = 'usage_values_ignored'" if key == "notes" else ""), {})
            for key, (_, table, columns, _) in TABLES.items()}
        for number in numbers:
            scenario, mapping = scenarios[number], mappings[number]
            ids = set(mapping.values())
            compared[scenario.name] = {
                key: (_rename_frame(scenario.rows[key], mapping),
                      built[key][built[key]["trace_id"].isin(ids)])
                for key in TABLES}
    return compared


# The columns that hold fractions; every other number is a whole one, which pandas may give as
# a float when its column has NULLs.
FRACTIONS = frozenset({"cost_utilisation", "token_utilisation", "cost_culprit_share",
                       "token_culprit_share", "cost_share", "token_share"})


def tidy(frame: pd.DataFrame, key: list[str]) -> list[dict[str, Any]]:
    """Rows in key order, NULLs as None, lists as lists (DuckDB gives arrays, chdb lists)."""
    frame = frame.sort_values(key).reset_index(drop=True).astype(object)
    rows = frame.where(frame.notna(), None).to_dict("records")
    for row in rows:
        for column, value in row.items():
            if hasattr(value, "tolist") and not isinstance(value, str):
                row[column] = value.tolist()
            elif isinstance(value, float) and column not in FRACTIONS and value.is_integer():
                row[column] = int(value)
    return rows


def difference(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> str:
    """Where two tidied tables differ first: a row count, or a row's differing columns."""
    if len(got) != len(want):
        return f"{len(got)} rows on ClickHouse, {len(want)} on DuckDB"
    for mine, theirs in zip(got, want, strict=True):
        columns = {c: (mine.get(c), theirs.get(c)) for c in theirs if mine.get(c) != theirs[c]}
        if columns:
            key = {c: theirs[c] for c in ("run_id", "span_id", "note") if c in theirs}
            return f"row {key}: (ClickHouse, DuckDB) {columns}"
    return "equal"
