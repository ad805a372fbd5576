"""The DuckDB → ClickHouse translation of the report queries (queries/translate.py): which files
exist, what every translation binds and reads, and, on both real engines (DuckDB and chdb), that
each rewrite gives DuckDB's answer where sqlglot alone would not. The reports themselves are
compared byte for byte in tests/clickhouse/test_clickhouse_backend.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from queries import translate
from queries.fragments import FRAGMENT_FOLDER
from queries.loader import (
    CLICKHOUSE_FOLDER,
    CLICKHOUSE_QUERIES,
    CLICKHOUSE_QUERY_NAMES,
    QUERIES,
    SQL_FOLDER,
    Query,
)
from store import clickhouse

TRANSLATED = sorted(CLICKHOUSE_QUERY_NAMES - set(translate.OVERRIDES))


def test_the_clickhouse_folder_holds_only_its_own_files_and_the_overrides() -> None:
    present = {path.stem for path in CLICKHOUSE_FOLDER.glob("*.sql")}
    assert present == set(translate.OVERRIDES)
    assert set(translate.OVERRIDES) <= CLICKHOUSE_QUERY_NAMES  # each replaces a DuckDB query
    assert all(len(reason) > 40 for reason in translate.OVERRIDES.values())
    assert len(TRANSLATED) >= 20


@pytest.mark.parametrize("name", TRANSLATED)
def test_translation_binds_the_same_parameters_and_reads_clickhouse_tables(name: str) -> None:
    query = CLICKHOUSE_QUERIES[name]
    assert query.parameters == QUERIES[name].parameters
    text = query.text
    assert "$" not in text and "::" not in text and "//" not in text
    for duckdb_only in ("quantile_cont", "percentile_cont", "strftime", "make_timestamp",
                        "hash(", "materialized", "any_value"):
        assert duckdb_only not in text.lower(), duckdb_only
    tables = set(re.findall(r"\b(?:FROM|JOIN)\s+([a-z_]+)", text))
    ctes = set(re.findall(r"\b([a-z_]+) AS \(", text))
    assert tables - ctes <= set(translate.TABLES.values()), tables - ctes
    assert CLICKHOUSE_QUERIES[name] is query  # translated once, kept


def test_the_run_filter_is_written_once() -> None:
    """Only the fragment spells the three-line run filter; the queries compose it."""
    spelled = [path.name for path in SQL_FOLDER.rglob("*.sql")
               if "$since_ns::BIGINT IS NULL" in path.read_text(encoding="utf-8")]
    assert spelled == ["run_filter.sql"]
    assert (FRAGMENT_FOLDER / "run_filter.sql").exists()
    users = [name for name, query in QUERIES.items()
             if "$since_ns::BIGINT IS NULL OR" in query.text]
    assert len(users) >= 17
    for name in users:
        assert {"since_ns", "until_ns", "agent"} <= QUERIES[name].parameters


def test_refused_constructs() -> None:
    with pytest.raises(translate.TranslationError, match="%j"):
        translate.translate("SELECT strftime(make_timestamp(x), '%j') FROM t")
    with pytest.raises(translate.TranslationError, match="PARAMETER_TYPES"):
        translate.translate("SELECT * FROM runs WHERE run_id = $made_up")
    with pytest.raises(translate.TranslationError, match="epoch_us"):
        translate.translate("SELECT epoch_us(now())")


# ---- each rewrite, on both engines ----------------------------------------------------------

ROWS = [(1_700_000_000_123_456_789, 0.25, "a", None), (1_700_000_000_987_654_321, 0.5, "b", 3),
        (1_700_000_777_000_000_001, 1.0, "b", 4), (1_767_225_600_000_000_000, 0.75, "c", None)]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    duck = duckdb.connect()
    duck.execute("CREATE TABLE steps (run_start_ns BIGINT, utilisation DOUBLE, agent VARCHAR, "
                 "n BIGINT)")
    duck.executemany("INSERT INTO steps VALUES (?, ?, ?, ?)", ROWS)
    folder = tmp_path_factory.mktemp("translate") / "chdb"
    con = clickhouse.connect(f"chdb://{folder}")
    con.command("CREATE TABLE budgetscope_steps (run_start_ns Int64, utilisation Float64, "
                "agent String, n Nullable(Int64)) ENGINE = Memory")
    values = ", ".join(f"({a}, {b}, '{c}', {'NULL' if d is None else d})" for a, b, c, d in ROWS)
    con.command(f"INSERT INTO budgetscope_steps VALUES {values}")
    yield duck, con
    duck.close()
    clickhouse.close_all()
    shutil.rmtree(folder, ignore_errors=True)


def _both(engines, sql: str, parameters: dict | None = None):  # type: ignore[no-untyped-def]
    duck, con = engines
    expected = duck.execute(sql, parameters or {}).fetchall()
    frame = _clickhouse(con, sql, parameters or {})
    got = [tuple(None if _is_null(v) else v for v in row)
           for row in frame.itertuples(index=False)]
    return expected, got


def _clickhouse(con, sql: str, parameters: dict):  # type: ignore[no-untyped-def]
    return con.frame(Query("t", "", translate.translate(sql), frozenset(parameters)), parameters)


def _is_null(value: object) -> bool:
    return bool(pd.isna(value))  # None, NaN, pandas NA


@pytest.mark.parametrize("sql", [
    # intDiv, not a float division: the nanoseconds survive
    "SELECT run_start_ns // 1000 AS us FROM steps ORDER BY 1",
    # strftime over make_timestamp, in UTC, milliseconds by %g
    "SELECT strftime(make_timestamp(run_start_ns // 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS t "
    "FROM steps ORDER BY 1",
    # ISO week and year (2026-01-01 is in ISO week 1 of 2026)
    "SELECT printf('%d-W%02d', isoyear(make_timestamp(run_start_ns // 1000)), "
    "week(make_timestamp(run_start_ns // 1000))) AS w FROM steps ORDER BY 1",
    # linear interpolation, as quantile_cont
    "SELECT quantile_cont(utilisation, 0.9) AS p90, quantile_cont(utilisation, 0.5) AS p50 "
    "FROM steps",
    # a sum over no rows is NULL, with or without FILTER
    "SELECT sum(n) AS s FROM steps WHERE agent = 'zzz'",
    "SELECT agent, sum(n) FILTER (WHERE utilisation > 0.6) AS s FROM steps GROUP BY ALL "
    "ORDER BY agent",
    # a percentile over no rows is NULL, with or without FILTER
    "SELECT quantile_cont(utilisation, 0.5) AS p FROM steps WHERE agent = 'zzz'",
    "SELECT quantile_cont(utilisation, 0.5) FILTER (WHERE n > 100) AS p, "
    "quantile_cont(utilisation, 0.5) FILTER (WHERE n > 3) AS q FROM steps",
    # an arg_max / arg_min over no rows is NULL (ClickHouse: '' or 0), with or without FILTER
    "SELECT arg_max(agent, utilisation) AS a, arg_min(run_start_ns, utilisation) AS b "
    "FROM steps WHERE agent = 'zzz'",
    "SELECT agent, arg_max(run_start_ns, utilisation) FILTER (WHERE utilisation > 0.6) AS a, "
    "arg_min(agent, n) FILTER (WHERE n > 3) AS b FROM steps GROUP BY ALL ORDER BY agent",
    # the run filter's bound parameters, NULL leaving a side open
    "SELECT count(*) AS c FROM steps WHERE ($agent::VARCHAR IS NULL OR agent = $agent::VARCHAR)",
])
def test_rewrite_gives_duckdbs_answer(engines, sql: str) -> None:  # type: ignore[no-untyped-def]
    parameters = {"agent": None} if "$agent" in sql else None
    expected, got = _both(engines, sql, parameters)
    assert got == expected


def test_bound_parameter_is_a_value(engines) -> None:  # type: ignore[no-untyped-def]
    sql = "SELECT count(*) AS c FROM steps WHERE ($agent::VARCHAR IS NULL OR agent = " \
          "$agent::VARCHAR)"
    for agent, count in (("b", 2), ("' OR 1=1 --", 0)):
        expected, got = _both(engines, sql, {"agent": agent})
        assert got == expected == [(count,)]


def test_projected_condition_is_a_bool(engines) -> None:  # type: ignore[no-untyped-def]
    _, con = engines
    frame = _clickhouse(con, "SELECT n IS NOT NULL AS has_n, s.agent FROM steps s "
                             "ORDER BY s.agent LIMIT 1", {})
    assert list(frame.columns) == ["has_n", "agent"]  # named as DuckDB names them
    assert frame["has_n"].dtype == bool or str(frame["has_n"].dtype) == "boolean"


def test_translation_is_cached() -> None:
    text = QUERIES["runs_report"].text
    assert translate.translate(text) is translate.translate(text)


def test_the_fragment_folder_is_not_a_query_folder() -> None:
    assert Path(FRAGMENT_FOLDER).parent == SQL_FOLDER
    assert "run_filter" not in QUERIES
