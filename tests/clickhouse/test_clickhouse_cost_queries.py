"""The cost reports' ClickHouse SQL (docs/metrics.md §11.9) answers as DuckDB's does, on the
same derived rows: the cost fleet (tests/support/cost_fleet.py) is ingested and derived by the
real DuckDB store, and its runs, steps, write steps, metered spans and declarations are copied
into ClickHouse's tables (chdb, through Parquet, with the column types Parquet gives them).
Every cost report, its summary, the weekly report (the hand-written twin of
queries/sql/clickhouse/weekly_report.sql), the runs report and the headline are then compared
as CSV bytes under several filters.

This checks the translation of each query (queries/translate.py) apart from the derivation;
the two derivations on the same spans are compared in tests/clickhouse/test_clickhouse_backend.py
and tests/clickhouse/test_conventions_parity.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from queries import reports
from queries.filters import Filters
from queries.render import to_csv_bytes
from store import clickhouse
from tests.support.cost_fleet import build_cost_fleet
from tests.support.trace_builder import open_db

pytestmark = pytest.mark.slow  # chdb beside DuckDB, about 10 s

# ClickHouse table ← the DuckDB rows it holds (steps and write steps carry their run's ISO week
# there, as store/clickhouse/sql/derive_build.sql makes them).
COPIES = {
    "budgetscope_runs": "SELECT * FROM runs",
    "budgetscope_steps": "SELECT s.*, r.week FROM steps s JOIN runs r USING (run_id)",
    "budgetscope_write_steps": "SELECT w.*, r.week FROM write_steps w JOIN runs r USING (run_id)",
    "budgetscope_metered_spans": "SELECT * FROM metered_spans",
    "budgetscope_declared_budgets": "SELECT * FROM declared_budgets",
}
REPORTS = ["cost", "cost_attribution", "token_attribution", "cost_attribution_summary",
           "token_attribution_summary", "models", "weekly", "runs", "headline",
           "pricing_coverage"]
FILTERS = {"all": Filters(), "agent": Filters(agent="shop"),
           "since": Filters.parse("2026-11-20", None),
           "window": Filters.parse("2026-11-16", "2026-11-23T10:30:00Z")}


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("ch_cost")
    duck = open_db(folder, "fleet.duckdb")
    build_cost_fleet(duck)
    ch = clickhouse.connect(f"chdb://{folder / 'data'}")
    for table, select in COPIES.items():
        parquet = folder / f"{table}.parquet"
        duck.execute(f"COPY ({select}) TO '{parquet}' (FORMAT parquet)")
        ch.command(f"CREATE TABLE {table} ENGINE = MergeTree ORDER BY tuple() "
                   f"AS SELECT * FROM file('{parquet}', Parquet)")
    yield duck, ch
    duck.close()
    clickhouse.close_all()
    shutil.rmtree(folder / "data", ignore_errors=True)


@pytest.mark.parametrize("filters", list(FILTERS))
@pytest.mark.parametrize("name", REPORTS)
def test_the_clickhouse_form_answers_the_same(engines, name: str, filters: str) -> None:
    duck, ch = engines
    expected = reports.ALL[name](duck, FILTERS[filters])
    got = reports.ALL[name](ch, FILTERS[filters])
    assert list(got.columns) == list(expected.columns)
    assert to_csv_bytes(got) == to_csv_bytes(expected)
    if filters == "all" and name in ("cost", "models", "weekly"):
        assert len(expected) > 2  # the comparison saw the fleet's rows, not an empty frame


def test_the_copies_hold_the_fleet(engines) -> None:
    _, ch = engines
    assert ch.scalar("SELECT count() FROM budgetscope_runs") == 4
    assert ch.scalar("SELECT sum(cost_nano) FROM budgetscope_runs") == 1_342_000_000
    assert Path(str(ch.url.path)).exists()
