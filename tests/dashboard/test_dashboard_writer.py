"""The standalone dashboard while another process writes the file: a page run that cannot open
it shows the results it read last with a note, and the next run after the writer let go is
whole, with every widget as the person left it. Before, the Runs page answered "Could not draw
Runs: KeyError ... rs_culprit" from the run after an `ingest` until the tab was reloaded.

Streamlit's AppTest runs the real app on a real DuckDB file; the writer is a real process that
opens the same file read-write, stores a row (so that the file's state moves, as an ingest
moves it) and holds it until it is told to let go."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import ui
from tests.support.apptest import check
from tests.support.trace_builder import TraceBuilder, open_db, store

HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS writer_was_here AS SELECT 1 AS x")
con.execute("CHECKPOINT")
print("held", flush=True)
sys.stdin.readline()
con.close()
"""


def _db(folder: Path) -> str:
    b = TraceBuilder(seed=6)
    for index, tool in enumerate(("fetch_report", "search", "fetch_report")):
        start = index * 20_000
        run = b.run(start, start + 12_000, 10_000, gen__ai_agent_name="support-agent",
                    budget_run_outcome="exhausted")
        b.step(run, "tool", tool, start, start + 11_000,
               **{"budget.outcome": "client_timeout"})
    con = open_db(folder, "writer.duckdb")
    store(con, b.finished())
    con.close()
    return str(folder / "writer.duckdb")


@pytest.fixture()
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = _db(tmp_path)
    monkeypatch.setenv("BUDGETSCOPE_DB", path)
    return path


class Writer:
    """A process holding the file read-write until `release()`."""

    def __init__(self, db: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", HOLD, db], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdout.readline().strip() == "held"  # type: ignore[union-attr]

    def release(self) -> None:
        if self.process.poll() is None:
            self.process.communicate("go\n", timeout=60)


@pytest.fixture()
def writer_of() -> Iterator[type[Writer]]:
    made: list[Writer] = []

    class Tracked(Writer):
        def __init__(self, db: str) -> None:
            super().__init__(db)
            made.append(self)

    yield Tracked
    for writer in made:
        writer.release()


def _runs_page() -> AppTest:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["range"] = "all"
    at.switch_page("app_pages/runs.py")
    at.run()
    check(at)
    return at


def _notes(at: AppTest) -> list[str]:
    return [info.value for info in at.info]


@pytest.mark.slow
def test_runs_keeps_its_data_and_its_search_while_a_writer_holds_the_file(db, writer_of):
    at = _runs_page()
    at.selectbox(key="rs_culprit").set_value("tool:fetch_report").run()
    check(at)
    writer = writer_of(db)
    at.run()  # what the page's own refresh does once the file moved
    check(at)
    assert any("busy" in note and "redraws by itself" in note for note in _notes(at)), \
        _notes(at)
    assert at.selectbox(key="rs_culprit").value == "tool:fetch_report"
    assert len(at.dataframe[0].value) == 2  # the runs read before, still shown
    writer.release()
    at.run()
    check(at)
    assert not any("busy" in note for note in _notes(at))
    assert at.selectbox(key="rs_culprit").value == "tool:fetch_report"
    assert len(at.dataframe[0].value) == 2


@pytest.mark.slow
def test_a_first_visit_while_held_says_why_and_recovers(db, writer_of):
    writer = writer_of(db)
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["range"] = "all"
    at.switch_page("app_pages/runs.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("held by" in error.value for error in at.error), [e.value for e in at.error]
    writer.release()
    at.run()
    check(at)
    assert len(at.dataframe[0].value) == 3


@pytest.mark.slow
@pytest.mark.parametrize("page", ["overview", "attribution", "failures", "weekly", "run"])
def test_other_pages_show_their_last_data_too(db, writer_of, page: str):
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["range"] = "all"
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    check(at)
    drawn = len(at.main.children)
    writer = writer_of(db)
    at.run()
    check(at)
    assert any("busy" in note for note in _notes(at)), _notes(at)
    assert len(at.main.children) >= drawn
    writer.release()
    at.run()
    check(at)


@pytest.mark.slow
def test_a_run_that_fails_before_drawing_the_search_keeps_it(db, writer_of):
    """A range read for the first time while the writer holds the file: nothing read before to
    show, so the page stops before its widgets. The next run must still know the search."""
    at = _runs_page()
    at.selectbox(key="rs_culprit").set_value("tool:fetch_report").run()
    check(at)
    writer = writer_of(db)
    at.selectbox(key="f_range").set_value("90d").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("held by" in error.value for error in at.error), [e.value for e in at.error]
    writer.release()
    at.selectbox(key="f_range").set_value("all").run()
    check(at)
    assert at.selectbox(key="rs_culprit").value == "tool:fetch_report"
    assert len(at.dataframe[0].value) == 2
