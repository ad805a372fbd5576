"""Spans whose parent never arrived are looked for before the walk only where a trace has no run
(or is capped); elsewhere after it, and only when the walk did not reach every span with a
parent (store/derive/sql/derive_reach.sql). Both ways must derive the same rows: here the same
traces are derived once alone (after the walk) and once beside a trace without a run (before),
with the shapes that make the walk miss spans: parents that never arrived, a span that is its
own parent, parent cycles with and without a run on them, a nested run whose parent is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from ingest.decode.flatten import flatten_request
from store import SpanWriter
from store.testing import PendingDerivations, refresh_touched, statement_files_run
from tests.support.convention_traces import CHAT, TOOL
from tests.support.trace_builder import TraceBuilder, open_db

TABLES = {"runs": "run_id", "steps": "trace_id, span_id", "derivation_notes": "ALL",
          "step_lifts": "ALL", "reconcile_links": "ALL", "traces_awaiting_root": "ALL"}


def shapes() -> tuple[TraceBuilder, list[Any], dict[str, str], str]:
    """The traces (each with a run), the spans to leave out, the parents to rewrite (span id
    -> parent id), and a trace without a run."""
    b = TraceBuilder(seed=4242, service="parents-svc")
    lost, parents = [], {}
    # a chat below a parent that never arrived
    run = b.run(0, 10_000, 10_000)
    gone = b.span("lost parent", 0, 9_000, parent=run)
    b.span("orphan chat", 1_000, 3_000, parent=gone, attributes=CHAT)
    lost.append(gone)
    # a nested run below a lost parent, with its own steps
    run = b.run(0, 10_000, 10_000)
    gone = b.span("lost wrapper", 0, 9_000, parent=run)
    inner = b.span("inner run", 500, 8_000, parent=gone, attributes={"budget.total_ms": 5_000})
    b.span("inner chat", 1_000, 2_000, parent=inner, attributes=CHAT)
    b.span("inner tool", 2_000, 3_000, parent=inner, attributes=TOOL)
    lost.append(gone)
    # no root at all, only a budgeted span whose parent is lost: its run is that span
    gone = b.span("lost root", 0, 10_000)
    orphan_run = b.span("orphan run", 0, 9_000, parent=gone, attributes={"budget.total_ms": 9_000})
    b.span("orphan run chat", 100, 900, parent=orphan_run, attributes=CHAT)
    b.span("orphan run stray", 1_000, 2_000, parent=b.span("lost too", 0, 3_000, parent=gone),
           attributes=TOOL)
    lost.append(gone)
    lost.append(next(s for s in b.finished() if s.name == "lost too"))
    # a span that is its own parent, and two spans each the other's parent
    run = b.run(0, 10_000, 10_000)
    b.span("plain chat", 0, 1_000, parent=run, attributes=CHAT)
    selfish = b.span("own parent", 2_000, 3_000, parent=run, attributes=CHAT)
    parents[b.span_id(selfish)] = b.span_id(selfish)
    first = b.span("cycle one", 4_000, 5_000, parent=run, attributes=TOOL)
    second = b.span("cycle two", 4_100, 4_900, parent=first, attributes=CHAT)
    parents[b.span_id(first)] = b.span_id(second)
    # a nested run on a parent cycle, beside the trace's root run
    run = b.run(0, 10_000, 10_000)
    b.span("root chat", 0, 1_000, parent=run, attributes=CHAT)
    looped = b.span("looped run", 2_000, 8_000, parent=run, attributes={"budget.total_ms": 6_000})
    below = b.span("below looped", 3_000, 4_000, parent=looped, attributes=CHAT)
    parents[b.span_id(looped)] = b.span_id(below)
    # a trace without any of this
    run = b.run(0, 10_000, 10_000)
    b.span("whole chat", 0, 1_000, parent=run, attributes=CHAT)
    # a trace without a run (its only span's parent never arrived, no budget)
    gone = b.span("never here", 0, 1_000)
    rootless = b.span("rootless span", 0, 500, parent=gone, attributes=CHAT)
    lost.append(gone)
    return b, lost, parents, b.trace_id(rootless)


def derive(folder: Path, with_rootless: bool, ran: list[str]) -> duckdb.DuckDBPyConnection:
    b, lost, parents, rootless = shapes()
    left_out = {b.span_id(span) for span in lost}
    spans = [s for s in b.finished() if b.span_id(s) not in left_out
             and (with_rootless or b.trace_id(s) != rootless)]
    request = encode_spans(spans)
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                parent = parents.get(span.span_id.hex())
                if parent is not None:
                    span.parent_span_id = bytes.fromhex(parent)
    folder.mkdir()
    con = open_db(folder)
    SpanWriter(con).write(flatten_request(request))
    with statement_files_run() as files:
        PendingDerivations(refresh_touched).run(con)
    ran.extend(files)
    return con


def rows(con: duckdb.DuckDBPyConnection, rootless: str) -> dict[str, list[tuple]]:
    return {table: con.execute(f"SELECT * FROM {table} WHERE trace_id <> ? ORDER BY {order}",
                               [rootless]).fetchall() for table, order in TABLES.items()}


def test_missing_parents_found_after_the_walk_derive_what_before_it_does(
        tmp_path: Path) -> None:
    rootless = shapes()[3]
    after_walk: list[str] = []
    alone = derive(tmp_path / "alone", False, after_walk)
    before_walk: list[str] = []
    beside = derive(tmp_path / "beside", True, before_walk)
    # the trace without a run sends the other traces' search before the walk
    assert after_walk[:4] == ["derive_refresh", "derive_walk", "derive_reach", "derive_walk"]
    assert "derive_reach" not in before_walk
    found = rows(alone, rootless)
    assert found == rows(beside, rootless)
    assert len(found["runs"]) == 8
    steps = {row[0] for row in alone.execute("SELECT span_name FROM steps").fetchall()}
    assert {"orphan chat", "inner chat", "inner tool", "orphan run chat", "orphan run stray",
            "own parent", "plain chat", "below looped"} <= steps
    alone.close()
    beside.close()

