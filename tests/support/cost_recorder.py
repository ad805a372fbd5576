"""A pytest plugin that records what the cost tests store and derive, for the ClickHouse parity
test (tests/clickhouse/test_conventions_parity.py, through tests/support/cost_parity.py).

Each test runs as it always does; `store` (tests/support/trace_builder.py, as the test module
imported it) is wrapped so that every span it stores is kept. When the test has passed, what
it stored (OTLP requests), what its DuckDB file then held of docs/metrics.md §11 (runs, steps,
metered spans, the usage note) and what was declared or priced there are written to one file
of the recording folder. A test that stored nothing through `store` writes nothing; a test
whose module does not hold `store`, or says COST_RECORDER_SEES_NOTHING (it stores in its
fixtures), could record nothing.

It records in two ways:

- in the suite's own run (tests/conftest.py loads the plugin), when the run holds the parity
  test: the cost tests (tests/*/test_cost_*.py) record as they run, into a folder their run's
  xdist workers share (`run_folder`), and each test that could record leaves its outcome
  there, so that the parity test reads what they stored instead of running them a second
  time (a subprocess of 103 worker-seconds on a loaded CI machine, 17 s quiet);
- on its own, for the parity test of a run that does not hold (all of) those tests:

    COST_RECORD_DIR=/tmp/x python -m pytest -p tests.support.cost_recorder tests/*/test_cost_*.py

  where only the tests that can record run (tests/support/cost_parity.py's record_cost_tests).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.lanes import COST_FILE
from tests.support.paths import run_temp

if TYPE_CHECKING:
    import duckdb
    from opentelemetry.sdk.trace import ReadableSpan

RECORD_ENV = "COST_RECORD_DIR"
# The parity test that reads the recordings, and the files it reads them from.
PARITY_FILE = "test_conventions_parity.py"
PARITY_TEST = "test_cost_rows_equal"
# Stash keys: the run's recording folder when the run records as it goes, and the files of
# which a test that could record was deselected (their recording is not whole).
_IN_RUN = pytest.StashKey[Path]()
_PARTIAL = pytest.StashKey[set[str]]()
_FAILED = pytest.StashKey[bool]()  # a test's: whether a phase of it failed


def can_record(item: pytest.Item) -> bool:
    """Whether the test's module holds `store` (what pytest_runtest_call wraps): a test of
    another module stores nothing the recorder sees."""
    function = getattr(item, "function", None)
    return (function is not None and "store" in function.__globals__
            and not function.__globals__.get("COST_RECORDER_SEES_NOTHING", False))


def records_in_run(item: pytest.Item) -> bool:
    """A test the suite's run records as it goes: one of the cost files', that can record."""
    return COST_FILE.fullmatch(Path(str(item.path)).name) is not None and can_record(item)


def file_name(nodeid: str) -> str:
    """The name a test's files have in the recording folder."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)


def run_folder(config: pytest.Config) -> Path:
    """The recording folder of this run: beside the basetemp of each of its xdist workers
    (<run>/popen-gwN), so that all of them share it, or in the basetemp of a run without."""
    return run_temp(config._tmp_path_factory.getbasetemp()) / "cost-recordings"  # type: ignore[attr-defined]


def partial_files(config: pytest.Config) -> set[str]:
    """Files (as item paths) of which a test that could record was deselected in this run."""
    return config.stash.get(_PARTIAL, set())


def pytest_deselected(items: list[pytest.Item]) -> None:
    for item in items:
        if records_in_run(item):
            item.config.stash.setdefault(_PARTIAL, set()).add(str(item.path))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Recording on its own, only the tests that can record run (the others, the CLI's and
    the reports' on files they build otherwise, were half the time of a recording and recorded
    nothing); the lanes run them all."""
    if not os.environ.get(RECORD_ENV):
        return
    deselected = [item for item in items if not can_record(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if can_record(item)]


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run that holds the parity test records its cost tests as they go (every xdist worker
    collects the whole run, so each knows); a run without, such as `make test-fast`, not."""
    if os.environ.get(RECORD_ENV):
        return
    if any(Path(str(item.path)).name == PARITY_FILE
           and getattr(item, "originalname", "") == PARITY_TEST for item in session.items):
        folder = run_folder(session.config)
        folder.mkdir(parents=True, exist_ok=True)
        session.config.stash[_IN_RUN] = folder


def _folder_of(item: pytest.Item) -> str | None:
    if os.environ.get(RECORD_ENV):
        return os.environ[RECORD_ENV]
    folder = item.config.stash.get(_IN_RUN, None)
    return str(folder) if folder is not None and records_in_run(item) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    folder = _folder_of(item)
    function = getattr(item, "function", None)
    namespace = function.__globals__ if folder and function is not None else {}
    if "store" not in namespace:
        yield
        return
    # here, not at the top: tests/conftest.py loads the plugin into every run, most of which
    # record nothing
    import duckdb
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.support import trace_builder
    from tests.support.cost_parity import snapshot

    requests: list[bytes] = []
    files: list[duckdb.DuckDBPyConnection] = []
    last: list[tuple[dict[str, Any], tuple[Any, ...]]] = []

    def recording_store(con: duckdb.DuckDBPyConnection, spans: Iterable[ReadableSpan],
                        *args: Any, **kwargs: Any) -> int:
        spans = list(spans)
        inserted = trace_builder.store(con, spans, *args, **kwargs)
        requests.append(encode_spans(spans).SerializeToString())
        files.append(con)
        last[:] = [snapshot(con)]
        return inserted

    original = namespace["store"]
    namespace["store"] = recording_store
    try:
        outcome = yield
    finally:
        namespace["store"] = original
    if outcome.excinfo is not None or not requests:
        return
    # the state the test ended in, when it left its file open (the fixtures close it later)
    with contextlib.suppress(duckdb.Error):
        last[:] = [snapshot(files[-1])]
    rows, settings = last[0]
    with (Path(folder) / f"{file_name(item.nodeid)}.pickle").open("wb") as out:  # type: ignore[arg-type]
        pickle.dump({"name": item.nodeid, "requests": requests, "rows": rows,
                     "settings": settings}, out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    """Recording in the suite's run: once a test that could record is torn down, whether it
    passed in every phase, for the parity test to know its recording is whole (a test that
    failed or was skipped recorded nothing)."""
    outcome = yield
    folder = item.config.stash.get(_IN_RUN, None)
    if folder is None or not records_in_run(item):
        return
    report: pytest.TestReport = outcome.get_result()
    failed = item.stash.setdefault(_FAILED, False) or report.failed
    item.stash[_FAILED] = failed
    if call.when == "teardown":
        done = folder / f"{file_name(item.nodeid)}.outcome"
        partial = done.with_suffix(f".{os.getpid()}")
        partial.write_text("failed" if failed else "passed")
        partial.replace(done)  # whole or absent, for a reader in another worker
