"""One run, for the on-call view: its row, its steps in waterfall order, its writes."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from queries.loader import Connection, frame


class RunNotFound(LookupError):
    """No run has this id; `candidates` are run ids of the same trace, if any."""

    def __init__(self, run_id: str, candidates: list[str]) -> None:
        hint = f"; runs of that trace: {', '.join(candidates)}" if candidates else ""
        super().__init__(f"no run {run_id!r} in this database{hint}")
        self.candidates = candidates


@dataclass(frozen=True)
class RunView:
    summary: pd.Series  # one row of the runs table
    steps: pd.DataFrame
    writes: pd.DataFrame


def load_run(con: Connection, run_id: str) -> RunView:
    run_id = run_id.strip().lower()
    summary = frame(con, "run_summary", {"run_id": run_id})
    if summary.empty:
        trace_id = run_id.split("/", 1)[0]
        candidates = [str(value) for value in
                      frame(con, "run_candidates", {"trace_id": trace_id})["run_id"]]
        raise RunNotFound(run_id, candidates)
    steps = waterfall_order(frame(con, "run_steps", {"run_id": run_id}))
    writes = frame(con, "run_writes", {"run_id": run_id})
    return RunView(summary.iloc[0], steps, writes)


def waterfall_order(steps: pd.DataFrame) -> pd.DataFrame:
    """Top-level steps by start; each followed by the steps nested in it, by start then depth.
    Done here rather than in SQL because a window over the run's steps made DuckDB trade the
    index scan for a full scan of steps (22 ms → see bench/bench_queries.py)."""
    if steps.empty:
        return steps
    top_start = steps["start_ns"].where(steps["is_top_level"].astype(bool))
    keyed = steps.assign(
        _top_start=top_start.groupby(steps["top_step_id"]).transform("max"),
        _nested=~steps["is_top_level"].astype(bool))
    return (keyed.sort_values(["_top_start", "top_step_id", "_nested", "start_ns", "step_level",
                               "span_id"], kind="stable")
            .drop(columns=["_top_start", "_nested"]).reset_index(drop=True))
