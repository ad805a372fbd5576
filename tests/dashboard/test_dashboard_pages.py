"""Every dashboard page under Streamlit's AppTest, on the bundled sample traces: no exception,
no error, and the numbers on the page equal what the `queries` functions return for the same
filters. Plus the empty-database state, deep links and hostile span names."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from budgetscope.cli import cli
from dashboard import data, fmt, sidebar, weekly_summaries
from dashboard.config import DashboardConfig, configure
from queries import run_story
from queries.filters import Filters
from queries.render import to_csv_bytes
from queries.run_view import load_run
from store import DatabaseOwner, Source, connect

# The reader's module itself, below the front: a test counts the opens it makes by replacing the
# connect it calls (tests/project/test_layers.py lists this exception).
from store.read import reader as store_reader
from tests.support import ui
from tests.support.apptest import (
    FILTERS,
    PARAMS,
    PREVIOUS,
    charts,
    metrics,
    open_page,
    plotly_array,
    query,
    trace,
)
from tests.support.trace_builder import TraceBuilder, store

PAGES = ["overview", "attribution", "cost", "failures", "utilisation", "reconciliation", "run",
         "weekly", "simulate", "budgets"]


# ---- every page --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_exception(db: str, page: str) -> None:
    at = open_page(page)
    titles = [t.value for t in at.title]
    assert titles, "every page has a title"
    # The filters are in the URL, as given, so the view can be shared as a link.
    assert {k: at.query_params[k] for k in PARAMS} == {k: [v] for k, v in PARAMS.items()} or \
        {k: at.query_params[k] for k in PARAMS} == PARAMS


def test_overview_numbers_equal_the_queries(db: str) -> None:
    at = open_page("overview")
    runs = query(db, "runs")
    budgeted = runs[runs["budget_ms"].notna()]
    exhausted = int(budgeted["exhausted"].fillna(False).astype(bool).sum())
    failures = query(db, "failures")
    recon = query(db, "reconciliation")
    util = budgeted["utilisation"].to_numpy(dtype=float)
    shown = metrics(at)
    assert shown["Runs"] == f"{len(runs):,}"
    assert shown["Exhaustion rate"] == fmt.percent(exhausted / len(budgeted))
    assert shown["Utilisation p50"] == fmt.percent(np.quantile(util, 0.5))
    assert shown["Utilisation p99"] == fmt.percent(np.quantile(util, 0.99))
    assert shown["Client give-ups"] == f"{failures['client_timeouts'].sum():,}"
    assert shown["Upstream failures"] == f"{failures['upstream_errors'].sum():,}"
    assert shown["Reconciliation rate"] == fmt.percent(
        recon["reconciled_writes"].sum() / recon["write_steps"].sum())
    assert shown["Orphan writes"] == f"{recon['orphan_writes'].sum():,}"
    # Change against the previous two weeks.
    before = query(db, "runs", PREVIOUS)
    runs_delta = next(m for m in at.metric if m.label == "Runs").delta
    assert runs_delta == f"{len(runs) - len(before):+,}"
    # Daily trend: the bars add up to the period's runs; top culprits are the attribution rows.
    figures = charts(at)
    daily = figures["Daily runs, exhaustion rate and utilisation"]
    assert plotly_array(trace(daily, "runs")["y"]).sum() == len(runs)
    top = trace(figures["Largest budget shares of exhausted runs"], "budget share")
    attribution = query(db, "attribution").head(10)
    assert list(reversed(top["y"])) == list(attribution["step_key"])
    np.testing.assert_allclose(plotly_array(top["x"])[::-1], attribution["budget_share"])
    # The review list holds exhausted, overrun or failed runs of the period.
    review = at.dataframe[0].value
    # each run named by the shortest start of its id no other run shares
    assert all(sum(run_id.startswith(start) for run_id in runs["run_id"]) == 1
               for start in review["run_id"])
    assert len(review) > 0


@pytest.mark.slow
def test_attribution_numbers_equal_the_queries(db: str) -> None:
    at = open_page("attribution")
    summary = query(db, "attribution_summary").iloc[0]
    shown = metrics(at)
    assert shown["Exhausted runs"] == f"{int(summary['exhausted_runs']):,}"
    attribution = query(db, "attribution")
    pd.testing.assert_frame_equal(at.dataframe[-1].value.reset_index(drop=True), attribution)
    share = trace(charts(at)["Budget share per step key (exhausted runs)"], "budget share")
    np.testing.assert_allclose(plotly_array(share["x"])[::-1], attribution["budget_share"].head(15))
    # Holder × culprit: every exhausted run with both is counted once.
    runs = query(db, "runs")
    dead = runs[runs["exhausted"].fillna(False).astype(bool) & runs["culprit"].notna()
                & runs["holder"].notna()]
    figure = charts(at)["Holder × culprit (exhausted runs)"]
    cells = figure["data"][0]
    assert sum(int(n) for n in cells["text"]) == len(dead)
    # one key order on both axes, and the diagonal drawn on it
    layout = figure["layout"]
    assert layout["xaxis"]["categoryarray"] == layout["yaxis"]["categoryarray"]
    assert any(shape["type"] == "line" for shape in layout["shapes"])
    same_key = dead[dead["culprit"] == dead["holder"]]
    same_call = same_key[same_key["culprit_step"] == same_key["holder_step"]]
    # The same call, another call of the same step, another step: the three add up to 100.0%
    # as shown, and the first is the query's culprit_is_holder_rate (it compares span ids,
    # the page compares numbers).
    assert len(same_call) / len(dead) == pytest.approx(summary["culprit_is_holder_rate"])
    tiles = [shown["Culprit is the holder"], shown["Another call, same step"],
             shown["Another step"]]
    assert tiles == fmt.percents_adding_up([len(same_call), len(same_key) - len(same_call),
                                            len(dead) - len(same_key)])
    assert round(sum(float(t.rstrip("%")) for t in tiles), 1) == 100.0
    for tile, part in zip(tiles, [len(same_call), len(same_key) - len(same_call),
                                  len(dead) - len(same_key)], strict=True):
        assert abs(float(tile.rstrip("%")) - 100 * part / len(dead)) < 0.1
    diagonal = [int(n) for x, y, n in zip(cells["x"], cells["y"], cells["text"], strict=True)
                if x == y]
    assert sum(diagonal) == len(same_key)


def test_failures_numbers_equal_the_queries(db: str) -> None:
    at = open_page("failures")
    failures = query(db, "failures")
    shown = metrics(at)
    assert shown["Client give-ups"] == f"{failures['client_timeouts'].sum():,}"
    assert shown["Upstream failures"] == f"{failures['upstream_errors'].sum():,}"
    assert shown["Refused"] == f"{failures['refused'].sum():,}"
    assert shown["Cancelled"] == f"{failures['cancelled'].sum():,}"
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), failures)
    by_step = charts(at)["Failures per step key, by class"]
    # Client give-ups and upstream failures are separate series with their own colours.
    give_ups = trace(by_step, "client give-up (client_timeout)")
    upstream = trace(by_step, "upstream failure (upstream_error)")
    assert give_ups["marker"]["color"] != upstream["marker"]["color"]
    assert plotly_array(give_ups["x"]).sum() == failures["client_timeouts"].sum()
    assert plotly_array(upstream["x"]).sum() == failures["upstream_errors"].sum()


def test_utilisation_numbers_equal_the_queries(db: str) -> None:
    at = open_page("utilisation")
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True),
                                  query(db, "utilisation"))
    pd.testing.assert_frame_equal(at.dataframe[1].value.reset_index(drop=True),
                                  query(db, "step_utilisation"))
    histogram = charts(at)["Run utilisation histogram"]
    bars = [t for t in histogram["data"] if t["type"] == "bar"]
    assert sum(plotly_array(t["y"]).sum() for t in bars) == query(db, "utilisation")["runs"].sum()
    cdf = charts(at)["Cumulative distribution of run utilisation"]
    lines = [t for t in cdf["data"] if t["type"] == "scatter" and t.get("fill") is None
             and t.get("name") not in ("p50", "p90", "p99")]
    assert lines and all(abs(plotly_array(t["y"])[-1] - 1) < 1e-9 for t in lines)


def test_reconciliation_numbers_equal_the_queries(db: str) -> None:
    at = open_page("reconciliation")
    report = query(db, "reconciliation")
    shown = metrics(at)
    assert shown["Write steps"] == f"{report['write_steps'].sum():,}"
    assert shown["Reconciled writes"] == f"{report['reconciled_writes'].sum():,}"
    assert shown["Orphan writes"] == f"{report['orphan_writes'].sum():,}"
    assert shown["Reconciliation rate"] == fmt.percent(
        report["reconciled_writes"].sum() / report["write_steps"].sum())
    tables = [d.value for d in at.dataframe]
    pd.testing.assert_frame_equal(tables[-1].reset_index(drop=True), report)
    # two weeks: a point a day, not two a fortnight
    daily = trace(charts(at)["Reconciliation rate per day"], "all write steps")
    by_period = query(db, "reconciliation_by_period").groupby("day")[
        ["reconciled_writes", "write_steps"]].sum()
    assert len(by_period) > 7
    np.testing.assert_allclose(plotly_array(daily["y"]),
                               by_period["reconciled_writes"] / by_period["write_steps"])
    by_tool = charts(at)["Writes by tool: read back (landed / not landed / unknown) or orphaned"]
    assert plotly_array(trace(by_tool, "landed")["x"]).sum() == report["landed"].sum()


def _agents_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The weekly page's rows of the report itself (each week's row over all agents left
    out), its week as the report writes it."""
    rows = table[table["agent"] != weekly_summaries.ALL_AGENTS].reset_index(drop=True)
    return rows.assign(week=rows["week"].str.split(" ").str[0])


def test_weekly_table_and_csv_equal_the_cli(db: str) -> None:
    at = open_page("weekly")
    weekly = query(db, "weekly")
    shown = _agents_rows(at.dataframe[0].value)
    pd.testing.assert_frame_equal(shown.drop(columns="week"), weekly.drop(columns="week"))
    assert list(shown["week"]) == [f"W{week[-2:]}" for week in weekly["week"]]
    result = CliRunner().invoke(cli, ["--db", db, "report", "weekly", "--since", ui.SINCE,
                                      "--until", ui.UNTIL])
    assert result.exit_code == 0, result.output
    # The download is the report's own rows with the CLI's renderer (the table above adds a
    # row over all agents a week); the browser test checks the downloaded bytes themselves.
    assert to_csv_bytes(weekly) == result.stdout_bytes
    command = at.code[0].value
    assert f"report weekly --since {ui.SINCE} --until {ui.UNTIL}" in command
    assert len(at.get("download_button")) == 1


def test_weekly_honours_the_agent_filter(db: str) -> None:
    at = open_page("weekly", {**PARAMS, "agent": "support-agent"})
    weekly = query(db, "weekly", Filters.parse(ui.SINCE, ui.UNTIL, "support-agent"))
    table = at.dataframe[0].value
    assert set(table["agent"]) == {"support-agent", weekly_summaries.ALL_AGENTS}
    pd.testing.assert_frame_equal(_agents_rows(table).drop(columns="week"),
                                  weekly.drop(columns="week"))
    assert at.query_params["agent"] in ("support-agent", ["support-agent"])


# ---- the run view ------------------------------------------------------------------------

def _an_exhausted_run(db: str) -> str:
    runs = query(db, "runs")
    return str(runs[runs["exhausted"].fillna(False).astype(bool)].iloc[0]["run_id"])


def test_run_view_by_deep_link(db: str) -> None:
    run_id = _an_exhausted_run(db)
    at = open_page("run", {**PARAMS, "run": run_id})
    con = connect(db, read_only=True)
    try:
        view = load_run(con, run_id)
    finally:
        con.close()
    shown = metrics(at)
    assert shown["Budget"] == fmt.duration(view.summary["budget_ms"])
    assert shown["Utilisation"] == fmt.percent(view.summary["utilisation"])
    assert shown["Exhausted"] == "yes"
    steps = at.dataframe[0].value
    assert len(steps) == len(view.steps)
    assert list(steps["class"]) == list(view.steps["step_class"])
    assert "culprit" in " ".join(steps["role"])
    waterfall = charts(at)["Steps against the deadline"]
    bars = [t for t in waterfall["data"] if t["type"] == "bar" and t.get("yaxis", "y") == "y"]
    assert sum(len(t["y"]) for t in bars) == len(view.steps)
    # every row named with its number, as the culprit and holder are
    rows = [label for t in bars for label in t["y"]]
    assert {label.strip(" └").split(" ", 1)[0] for label in rows} == {
        f"#{n}" for n in view.steps["number"]}
    # every failed step marked, whatever its width
    marked = next(t for t in waterfall["data"] if t.get("name", "").startswith("failed"))
    assert len(marked["y"]) == int((view.steps["step_class"] != "ok").sum())
    left = next(t for t in waterfall["data"] if t.get("name") == "budget left at its start")
    assert len(plotly_array(left["y"])) == int(view.steps["is_top_level"].sum())
    # the four answers above the fold, in the words `budgetscope run` prints
    summary = " ".join(m.value for m in at.markdown)
    assert "**What happened:**" in summary and "**Failures:**" in summary
    assert f"#{int(view.summary['culprit_step'])}" in summary
    # The copyable link names the run and the filters.
    link = next(c.value for c in at.code if "/run?" in c.value)
    assert f"run={run_id}" in link and "since=2026-11-16" in link


def _page_links(at: AppTest) -> list[tuple[str, str, dict]]:
    """(label, page, query parameters) of every page link."""
    return [(link.proto.label, link.proto.page, dict(urllib.parse.parse_qsl(
        link.proto.query_string))) for link in at.get("page_link")]


def test_the_run_views_next_step_fits_the_run(db: str) -> None:
    """For 31 of 40 exhausted demo runs the next step was the generic Compare, which for an
    agent's only run led to "Nothing to compare with". Each run's next step is the one
    run_story.next_step gives it, its What if link carries that scenario, its commands are
    shown, and Compare is offered only when a completed run of its agent exists."""
    runs = query(db, "runs")
    con = connect(db, read_only=True)
    try:
        kinds: dict[str, str] = {}
        for row in runs[runs["exhausted"].fillna(False).astype(bool)].itertuples():
            view = load_run(con, row.run_id)
            step = run_story.next_step(view.summary, view.steps, view.writes, True)
            kinds.setdefault(step.kind, row.run_id)
        no_budget = str(runs[runs["budget_ms"].isna()].iloc[0]["run_id"])
    finally:
        con.close()
    # the sample's exhausted runs need What if at a smaller cap and a declared cap both
    assert {run_story.SMALLER_CAP, run_story.DECLARE_CAP} <= set(kinds)
    for kind in (run_story.SMALLER_CAP, run_story.DECLARE_CAP):
        at = open_page("run", {**PARAMS, "run": kinds[kind]})
        view_step = next(m.value for m in at.markdown if m.value.startswith("**Next step:**"))
        what_if = [(label, query) for label, page, query in _page_links(at)
                   if page == "simulate"]
        assert len(what_if) == 1, _page_links(at)
        label, scenario = what_if[0]
        key, _, cap_ms = scenario["cap"].rpartition("=")
        assert label == f"What if, with {key} capped at {fmt.duration(int(cap_ms))}"
        assert fmt.escape_md(key) in view_step
        commands = next(c.value for c in at.code if "simulate --cap" in c.value)
        assert f"--cap {key}=" in commands and f"--db {db}" in commands
        if kind == run_story.DECLARE_CAP:
            assert f"budgets cap {key} " in commands
    # a run without a budget: declare one; its agent (triage-agent) states no outcome, so no
    # completed run exists to compare with and no Compare link is offered
    at = open_page("run", {**PARAMS, "run": no_budget})
    assert any(m.value.startswith("**Next step:** Declare") for m in at.markdown)
    assert any("budgets set" in c.value for c in at.code)
    assert not [p for _, p, _ in _page_links(at) if p == "compare"]
    assert not [p for _, p, _ in _page_links(at) if p == "simulate"]


def test_run_view_says_why_each_span_is_or_is_not_a_step(db: str) -> None:
    """Behind a toggle, the explanation `budgetscope run --spans` prints (store.explain)."""
    from store import explain_trace

    run_id = _an_exhausted_run(db)
    at = open_page("run", {**PARAMS, "run": run_id})
    assert not [t for t in at.dataframe if "why" in t.value.columns]  # not paid for up front
    at.toggle(key="explain_spans").set_value(True).run()
    assert not at.exception
    table = next(t.value for t in at.dataframe if "why" in t.value.columns)
    con = connect(db, read_only=True)
    try:
        explained = explain_trace(con, run_id.split("/")[0])
    finally:
        con.close()
    assert list(table["why"]) == list(explained["why"])
    assert list(table["role"]) == list(explained["role"])
    assert "run" in set(table["role"]) and "step" in set(table["role"])


def test_root_link_with_run_opens_the_run_view(db: str) -> None:
    run_id = _an_exhausted_run(db)
    at = open_page("overview", {"run": run_id})
    assert at.title[0].value == "Run view"
    assert metrics(at)["Exhausted"] == "yes"


def test_unknown_run_is_a_message_not_a_traceback(db: str) -> None:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["run"] = "0" * 32
    at.switch_page("app_pages/run.py")
    at.run()
    assert not at.exception
    assert "no run" in at.error[0].value


def test_bad_filter_values_are_warnings(db: str) -> None:
    at = open_page("overview", {"range": "custom", "since": "yesterday-ish"})
    assert not at.exception
    assert any("yesterday" in w.value for w in at.sidebar.warning)


# ---- empty and hostile databases ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_empty_database_explains_how_to_send_data(tmp_path: Path, kind: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nothing.duckdb"
    if kind == "empty":
        connect(path).close()
    monkeypatch.setenv("BUDGETSCOPE_DB", str(path))
    at = AppTest.from_file(str(ui.APP), default_timeout=60)
    at.run()
    assert not at.exception
    assert at.header[0].value == "No agent runs here yet"
    code = "\n".join(c.value for c in at.code)
    assert "http://127.0.0.1:4318/v1/traces" in code
    assert "OTLPSpanExporter" in code and "budget.total_ms" in code
    assert not at.get("plotly_chart")
    # Regression: the path was shown escaped (\/tmp\/…), the snippet held a lint comment and
    # set no service.name.
    assert str(path) in [c.value for c in at.code]
    assert "noqa" not in code and '"service.name": "my-agent"' in code
    assert "\\/" not in code + "\n".join(m.value for m in at.markdown)


@pytest.mark.slow
def test_span_data_is_escaped_before_markdown(tmp_path_factory: pytest.TempPathFactory,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    db = ui.hostile_db(tmp_path_factory)
    monkeypatch.setenv("BUDGETSCOPE_DB", db)
    runs = query(db, "runs", Filters())
    at = open_page("run", {"range": "all", "run": str(runs.iloc[0]["run_id"])})
    for element in [*at.markdown, *at.caption]:
        text = element.value
        # Every Markdown-significant character is backslash-escaped, so none is live.
        assert not re.search(r"(?<!\\)<(img|script)|(?<!\\)\]\(javascript", text), text
    assert any("\\<img" in m.value for m in at.markdown)
    for page in PAGES:
        open_page(page, {"range": "all"})


# ---- where the data comes from -----------------------------------------------------------

@pytest.mark.slow
def test_pages_leave_the_file_free_for_other_processes(db: str) -> None:
    """Standalone, the dashboard opens the file read-only for a page run and closes it: another
    process can open it read-write (as `budgetscope ingest` would) right after."""
    open_page("overview")
    probe = subprocess.run([sys.executable, "-c", "import duckdb, sys; "
                            "duckdb.connect(sys.argv[1]).close()", db],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr


def test_a_page_run_opens_the_file_once(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every report of a page's first view misses the cache; they share one read-only open of
    the file for the run (not one each), closed when the page is drawn."""
    opened: list[object] = []
    real_connect = store_reader.connect  # the dashboard opens through store/read/reader.py

    def counting_connect(*args: object, **kwargs: object) -> object:
        con = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(con)
        return con

    monkeypatch.setattr(store_reader, "connect", counting_connect)
    data.clear_cache()
    open_page("overview")
    assert len(opened) == 1
    with pytest.raises(Exception, match="(?i)closed"):
        opened[0].execute("SELECT 1")  # type: ignore[attr-defined]
    data.clear_cache()


@pytest.mark.slow
def test_inside_serve_it_reads_through_the_owner(tmp_path_factory: pytest.TempPathFactory,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    source = Path(ui.hostile_db(tmp_path_factory))
    copy = tmp_path / "served.duckdb"
    shutil.copy(source, copy)
    monkeypatch.setenv("BUDGETSCOPE_DB", str(tmp_path / "not-this-one.duckdb"))
    owner = DatabaseOwner(copy)
    configure(DashboardConfig(Source(owner.path, owner=owner)))  # as serve does
    try:
        at = open_page("overview", {"range": "all"})
        assert metrics(at)["Runs"] == "1"
        assert "served by this process" in "\n".join(t.value for t in at.sidebar.text)
    finally:
        configure(None)
        owner.close()


@pytest.mark.slow
def test_a_database_held_by_another_process_is_a_message(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; "
                               "c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
                               "time.sleep(60)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("BUDGETSCOPE_DB", str(path))
        at = AppTest.from_file(str(ui.APP), default_timeout=60)
        at.run()
        assert not at.exception
        assert "held by" in at.error[0].value
        result = CliRunner().invoke(cli, ["--db", str(path), "dashboard"])
        assert result.exit_code == 1 and "held by" in result.output
    finally:
        holder.kill()
        holder.wait()


def test_dashboard_command_without_a_database(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "none.duckdb"), "dashboard"])
    assert result.exit_code == 1
    assert "no database" in result.output and "budgetscope demo" in result.output


@pytest.mark.slow
def test_attribution_lists_the_runs_of_a_culprit(db: str) -> None:
    at = open_page("attribution")
    key = at.selectbox(key="culprit_pick").value
    table = next(d.value for d in at.dataframe if "culprit_share" in d.value.columns)
    runs = query(db, "runs")
    expected = runs[runs["exhausted"].fillna(False).astype(bool) & (runs["culprit"] == key)]
    assert sorted(table["run_id"]) == sorted(expected["run_id"])
    assert at.get("page_link"), "each listed run opens in the run view"


def test_sidebar_says_what_the_database_holds(db: str) -> None:
    at = open_page("weekly")
    text = "\n".join(t.value for t in at.sidebar.text)
    runs = query(db, "runs", Filters())
    assert db in text
    assert f"runs   {len(runs):,}" in text
    assert runs["start"].max()[:16].replace("T", " ") in text
    agents = at.sidebar.selectbox(key="f_agent").options
    assert agents == ["All agents", *sorted(runs["agent"].dropna().unique())]


def test_without_filters_it_opens_on_data(db: str) -> None:
    """The sample ended before today's week may: a bare link opens on all time, not on an
    empty week; an empty range offers a way back to the data."""
    at = open_page("overview", {})
    expected = sidebar.default_preset(data_status(db), dt.datetime.now(dt.UTC))
    assert at.query_params["range"] in (expected, [expected])
    at = open_page("overview", {"range": "custom", "since": "2020-01-01",
                                "until": "2020-01-02"})
    assert "No runs started" in at.info[0].value
    at.button(key="show_all").click().run()
    assert not at.exception
    assert at.query_params["range"] in ("all", ["all"])
    assert metrics(at)["Runs"] == f"{len(query(db, 'runs', Filters())):,}"


def test_the_demo_opens_on_its_samples_weeks(db: str) -> None:
    """`budgetscope demo` gives the dashboard the sample's own weeks: "Last 7 days" held 24 of
    the sample's 1,800 runs while the terminal had just printed the all-time table."""
    from budgetscope.commands.demo import sample_weeks

    runs = query(db, "runs", Filters())
    opening = sample_weeks(runs["start"])
    assert opening is not None and (opening.since, opening.until) == ("2026-10-26",
                                                                      "2026-11-30")
    configure(DashboardConfig(Source(db), opening=opening))
    try:
        at = open_page("overview", {})
        assert at.query_params["since"] in ("2026-10-26", ["2026-10-26"])
        assert metrics(at)["Runs"] == f"{len(runs):,}"
        # an empty previous period is nothing to compare with, not "+1,800 runs"
        assert at.metric[0].proto.delta == ""
        assert any("holds no runs" in c.value for c in at.caption)
        weekly = _agents_rows(open_page("weekly", {}).dataframe[0].value)
        assert int(weekly["runs"].sum()) == len(runs) and not weekly["partial_week"].any()
    finally:
        configure(None)


def data_status(db: str) -> data.DatabaseStatus:
    runs = query(db, "runs", Filters())
    return data.DatabaseStatus(db, False, len(runs), (), spans=0, newest_received=None,
                               newest_run_start=str(runs["start"].max()))


def test_reload_shows_spans_that_arrived_since(tmp_path_factory: pytest.TempPathFactory,
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside serve, every commit grows the database's WAL, which is part of the cache key:
    the next page run shows what came in, without waiting for the cache to expire."""
    copy = tmp_path / "growing.duckdb"
    shutil.copy(ui.hostile_db(tmp_path_factory), copy)
    owner = DatabaseOwner(copy)
    configure(DashboardConfig(Source(owner.path, owner=owner)))  # as serve does
    try:
        at = open_page("overview", {"range": "all"})
        assert metrics(at)["Runs"] == "1"
        b = TraceBuilder(seed=5)
        b.run(0, 1_000, 10_000, budget_run_outcome="completed")
        cursor = owner.cursor()
        store(cursor, b.finished())
        cursor.close()
        at.run()
        assert metrics(at)["Runs"] == "2"
        at.sidebar.button(key="reload").click().run()  # Reload still works, and changes nothing
        assert metrics(at)["Runs"] == "2"
    finally:
        configure(None)
        owner.close()


def test_weekly_opens_on_full_weeks_and_marks_partial_ones(db: str) -> None:
    """Regression: the default rolling range labelled cut weeks as whole ISO weeks."""
    at = open_page("weekly", {})
    expected = sidebar.default_preset(data_status(db), dt.datetime.now(dt.UTC), "weekly")
    assert expected in ("4w", "all")
    assert at.query_params["range"] in (expected, [expected])
    table = at.dataframe[0].value
    assert not table["partial_week"].any() and not table["week"].str.endswith("*").any()
    assert not [i for i in at.info if "Partial weeks" in i.value]

    # Wednesday 2026-11-18 to Monday 2026-11-23 cuts 2026-W47 short.
    at = open_page("weekly", {"range": "custom", "since": "2026-11-18", "until": "2026-11-23"})
    table = at.dataframe[0].value
    # marked in the main table, with the days it counts (Wednesday to Sunday)
    assert set(table.loc[table["partial_week"], "week"]) == {"W47 Nov 18–22*"}
    note = next(i.value for i in at.info if "Partial weeks" in i.value)
    assert "2026-W47" in note
    at.button(key="weekly_full_weeks").click().run()
    assert at.query_params["range"] in ("4w", ["4w"])


def test_run_view_has_one_mark_for_no_value(db: str) -> None:
    """Regression: Python's None showed in the steps table; one rendering of "no value"."""
    at = open_page("run", {**PARAMS, "run": _an_exhausted_run(db)})
    steps = at.dataframe[0].value
    for column in ("effect status", "idempotency key", "attempt", "utilisation", "allocated"):
        values = list(steps[column])
        assert None not in values and "None" not in values, column
    assert fmt.NO_VALUE in set(steps["effect status"]) | set(steps["allocated"])
    story = " ".join(m.value for m in at.markdown)
    assert "deadline" in story


def test_runs_page_finds_what_the_cli_finds(db: str) -> None:
    """Regression: "Runs worth reviewing" stopped at 25 rows; the Runs page lists every run in
    the filters, narrowed by the URL a chart links to, paged."""
    from queries.run_search import RunSearch, search_runs
    con = connect(db, read_only=True)
    try:
        every = search_runs(con, FILTERS, RunSearch())
        culprit = every.runs.loc[every.runs["exhausted"].fillna(False).astype(bool),
                                 "culprit"].mode()[0]
        expected = search_runs(con, FILTERS, RunSearch(exhausted=True, culprit=culprit))
    finally:
        con.close()
    at = open_page("runs", PARAMS)
    assert at.title[0].value == "Runs"
    assert f"**{every.total:,}** runs match" in " ".join(m.value for m in at.markdown)
    assert len(at.dataframe[0].value) == min(50, every.total)  # one page
    at = open_page("runs", {**PARAMS, "exhausted": "yes", "culprit": culprit})
    table = at.dataframe[0].value
    assert list(table["run_id"]) == list(expected.runs["run_id"])[:50]
    # each named as one run's step: its number, then the key
    assert {name.split(" ", 1)[1] for name in table["culprit"]} == {culprit}
    assert list(table["culprit"]) == [f"#{n} {culprit}" for n in
                                      expected.runs["culprit_step"].head(50)]
    assert set(table["exhausted"]) == {"yes"}
    # the search is in the URL, so it is a link to paste
    assert at.query_params["culprit"] in (culprit, [culprit])
    # the next page continues where the first stopped
    if every.total > 50:
        at = open_page("runs", {**PARAMS, "page": "2"})
        assert list(at.dataframe[0].value["run_id"]) == list(every.runs["run_id"])[50:100]


def test_runs_page_offers_each_culprit_once_and_keeps_a_linked_one(db: str) -> None:
    """The Culprit choices are the filters' culprits, each once, runs without one left out; a
    culprit a link names that the filters hold no run of stays chosen (the search is shown,
    not silently dropped)."""
    runs = query(db, "runs")
    at = open_page("runs", {**PARAMS, "culprit": "tool:nosuch"})
    culprit = next(box for box in at.selectbox if box.label == "Spent the most")
    present = sorted({str(value) for value in runs["culprit"] if value is not None
                      and not pd.isna(value)})
    assert present and culprit.options == ["any step key", *present, "tool:nosuch"]
    assert culprit.value == "tool:nosuch"


@pytest.mark.slow
def test_no_line_crosses_a_label_of_the_waterfall(db: str) -> None:
    """The reserve and deadline lines crossed the '★ culprit' label, and 'run end' ran into
    the deadline: on every exhausted run of the sample, no vertical line falls within a
    label's width (run_figures' estimate of it, on the narrowest plot) on its side."""
    from dashboard import run_figures

    runs = query(db, "runs")
    con = connect(db, read_only=True)
    try:
        views = [load_run(con, run_id) for run_id in
                 runs[runs["exhausted"].fillna(False).astype(bool)]["run_id"]]
    finally:
        con.close()
    for view in views:
        figure = run_figures.waterfall(view.summary, view.steps)
        lines = [float(shape.x0) for shape in figure.layout.shapes if shape.x0 == shape.x1]
        run = view.summary
        end_ms = (int(run["latest_end_ns"]) - int(run["start_ns"])) / 1e6
        deadline_ms = (int(run["deadline_ns"]) - int(run["start_ns"])) / 1e6
        horizon = max(end_ms, deadline_ms)
        room = horizon / fmt.duration_axis_unit(horizon)[1]  # the time axis, in its unit
        for note in figure.layout.annotations:
            width = run_figures.label_width(str(note.text), room)
            x = float(note.x)
            right = note.xanchor == "left" or (note.xanchor is None and "right" in str(
                getattr(note, "name", "") or "right"))
            span = (x, x + width) if right else (x - width, x)
            others = [line for line in lines if abs(line - x) > 1e-9]  # not its own line
            assert not [line for line in others if span[0] < line < span[1]], (
                view.summary["run_id"], note.text, note.xanchor, span, lines)


def test_one_run_found_reads_in_the_singular(db: str) -> None:
    """"1 run match": a count of one takes the singular, of more the plural."""
    run_id = _an_exhausted_run(db)
    at = open_page("runs", {**PARAMS, "id": run_id[:12]})
    said = " ".join(m.value for m in at.markdown)
    assert "**1** run matches · showing 1–1 · page 1 of 1" in said, said
    at = open_page("runs", {**PARAMS, "exhausted": "yes"})
    assert re.search(r"\*\*\d+\*\* runs match · ", " ".join(m.value for m in at.markdown))
