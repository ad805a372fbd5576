"""Why each span of a trace is, or is not, a step (docs/conventions.md): `budgetscope run RUN_ID
--spans` and the run view's span list.

The answer comes from the derivation itself, not a second reading of the rules: the trace's
spans and exception log records are copied into an in-memory database, the recognition
(statements.py's recognise) runs there on that one trace, and derive_explain.sql reads its
temp tables before they are dropped. The file is only read, so this works on a read-only file,
beside a writer, and through the server's read API alike. A trace whose root has not arrived is
explained as it will be measured (from its earliest span).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pandas as pd

from store.derive.statements import QUERIES, recognise, set_root_cutoff
from store.file.ddl import apply_schema

# What is copied: the spans and log records of the trace and of the traces the rules across
# traces of docs/conventions.md tie it to (a one-span HTTP trace and the step of another trace
# it joined), and the model names its service's other traces carry
# (store/file/schema/recognition.sql): the recognition reads nothing else. A stray joined one
# step of the file, so the copy, holding that step's trace, decides as the file did; one that
# stayed a run ties no trace to it.
_LINKED = ("SELECT trace_id FROM stray_calls WHERE holder_trace_id = $trace "
           "UNION SELECT holder_trace_id FROM stray_calls "
           "WHERE trace_id = $trace AND holder_trace_id IS NOT NULL")
_READS = ("SELECT * FROM spans WHERE trace_id IN (SELECT unnest($traces))",
          "SELECT * FROM log_records WHERE trace_id IN (SELECT unnest($traces))",
          "SELECT * FROM trace_arrivals WHERE trace_id IN (SELECT unnest($traces))",
          "SELECT * FROM model_span_names WHERE service_name IN (SELECT unnest($services))")
_TABLES = ("spans", "log_records", "trace_arrivals", "model_span_names")
_SERVICES = ("SELECT DISTINCT coalesce(service_name, '') FROM spans "
             "WHERE trace_id IN (SELECT unnest($traces))")


def explain_trace(con: duckdb.DuckDBPyConnection, trace_id: str) -> pd.DataFrame:
    """Every span of the trace, and of the one-span HTTP traces joined to its steps
    (docs/conventions.md), in tree order (parent before children, siblings by start), with
    `role` (one of store/rows/vocabulary.SPAN_ROLES), `why` (a sentence), the matched `step_row`
    and `convention`, `step_key`, `class`, `other_span_id` (the span `why` refers to) and
    `indent`."""
    traces = sorted({trace_id, *(row[0] for row in con.execute(
        _LINKED, {"trace": trace_id}).fetchall())})
    services = [row[0] for row in con.execute(_SERVICES, {"traces": traces}).fetchall()]
    memory = duckdb.connect(":memory:")
    try:
        apply_schema(memory)
        for read, table in zip(_READS, _TABLES, strict=True):
            memory.register("copied", con.sql(read, params={
                key: value for key, value in (("traces", traces), ("services", services))
                if f"${key}" in read}).to_arrow_table())
            memory.execute(f"INSERT INTO {table} BY NAME SELECT * FROM copied")
            memory.unregister("copied")
        memory.execute("CREATE OR REPLACE TEMP TABLE touched_traces AS "
                       "SELECT trace_id, min(received_at) AS since FROM spans GROUP BY ALL")
        # as it will be measured: a trace still waiting for its root, from its earliest span
        set_root_cutoff(memory, datetime.now(UTC) + timedelta(seconds=1))
        recognise(memory)
        found = memory.execute(QUERIES["derive_explain"].text).df()
    finally:
        memory.close()
    # the trace's own spans, and the strays walked in its runs
    found = found[(found["trace_id"] == trace_id) | (found["run_trace_id"] == trace_id)]
    return _tree_order(found.reset_index(drop=True))


def _tree_order(spans: pd.DataFrame) -> pd.DataFrame:
    """Parent before children, siblings by start; each with its depth in the tree as walked
    (`indent`). Spans left in cycles come last, at depth 0."""
    if spans.empty:
        return spans.assign(indent=pd.Series(dtype=int))
    children: dict[object, list[int]] = {}
    ids = set(spans["span_id"])
    for index, row in spans.sort_values(["start_ns", "span_id"]).iterrows():
        parent = row["walk_parent"] if row["walk_parent"] in ids else None
        if parent == row["span_id"]:
            parent = None
        children.setdefault(parent, []).append(index)
    order: list[tuple[int, int]] = []
    seen: set[int] = set()
    stack = [(index, 0) for index in reversed(children.get(None, []))]
    while stack:
        index, depth = stack.pop()
        if index in seen:
            continue
        seen.add(index)
        order.append((index, depth))
        span_id = spans.at[index, "span_id"]
        stack.extend((child, depth + 1) for child in reversed(children.get(span_id, [])))
    order.extend((index, 0) for index in spans.index if index not in seen)
    ordered = spans.loc[[index for index, _ in order]].copy()
    ordered["indent"] = [depth for _, depth in order]
    return ordered.reset_index(drop=True)
