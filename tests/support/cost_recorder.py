"""A pytest plugin that records what the cost tests store and derive, for the ClickHouse parity
test (tests/clickhouse/test_conventions_parity.py, through tests/support/cost_parity.py).

    COST_RECORD_DIR=/tmp/x python -m pytest -p tests.support.cost_recorder tests/*/test_cost_*.py

Each test runs as it always does; `store` (tests/support/trace_builder.py, as the test module
imported it) is wrapped so that every span it stores is kept. When the test has passed, what
it stored (OTLP requests), what its DuckDB file then held of docs/metrics.md §11 (runs, steps,
metered spans, the usage note) and what was declared or priced there are written to one file
of COST_RECORD_DIR. A test that stored nothing through `store` writes nothing, and a test
whose module does not hold `store`, or says COST_RECORDER_SEES_NOTHING (it stores in its
fixtures), is not run at all (it could record nothing).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from tests.support import trace_builder
from tests.support.cost_parity import snapshot

RECORD_ENV = "COST_RECORD_DIR"


def _can_record(item: pytest.Item) -> bool:
    """Whether the test's module holds `store` (what pytest_runtest_call wraps): a test of
    another module stores nothing the recorder sees."""
    function = getattr(item, "function", None)
    return (function is not None and "store" in function.__globals__
            and not function.__globals__.get("COST_RECORDER_SEES_NOTHING", False))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Recording, only the tests that can record run (the others, the CLI's and the reports'
    on files they build otherwise, were half the time of a recording and recorded nothing);
    the lanes run them all."""
    if not os.environ.get(RECORD_ENV):
        return
    deselected = [item for item in items if not _can_record(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if _can_record(item)]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    folder = os.environ.get(RECORD_ENV)
    function = getattr(item, "function", None)
    namespace = function.__globals__ if folder and function is not None else {}
    if "store" not in namespace:
        yield
        return
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
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)
    with (Path(folder) / f"{name}.pickle").open("wb") as out:
        pickle.dump({"name": item.nodeid, "requests": requests, "rows": rows,
                     "settings": settings}, out)
