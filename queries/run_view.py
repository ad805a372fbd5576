"""One run, for the on-call view: its row, its steps in waterfall order, its writes, and the
OTLP log records of its trace beside their spans (a short list, not a log search)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from queries.loader import Connection, frame


class RunNotFound(LookupError):
    """No run has this id; `candidates` are run ids of the same trace, if any; `waiting`
    says why a trace with stored spans has no run yet."""

    def __init__(self, run_id: str, candidates: list[str], waiting: str = "") -> None:
        hint = f"; runs of that trace: {', '.join(candidates)}" if candidates else ""
        super().__init__(f"no run {run_id!r} in this database{hint}{waiting}")
        self.candidates = candidates


@dataclass(frozen=True)
class RunView:
    summary: pd.Series  # one row of the runs table
    steps: pd.DataFrame
    writes: pd.DataFrame
    # the first LOG_RECORDS_SHOWN log records of the run's trace (time, severity, span, body)
    log_records: pd.DataFrame = field(default_factory=pd.DataFrame)


# Log records shown with a run: enough for on-call to read what the agent said, few enough
# that a chatty agent cannot make the page or the terminal output huge.
LOG_RECORDS_SHOWN = 50
LOG_COLUMNS = ("time_ns", "severity_number", "severity_text", "span_id", "step_key", "body",
               "exception_type")


def load_run(con: Connection, run_id: str) -> RunView:
    run_id = run_id.strip().lower()
    summary = frame(con, "run_summary", {"run_id": run_id})
    if summary.empty:
        trace_id = run_id.split("/", 1)[0]
        candidates = [str(value) for value in
                      frame(con, "run_candidates", {"trace_id": trace_id})["run_id"]]
        waiting = "" if candidates else _why_no_run(con, trace_id)
        raise RunNotFound(run_id, candidates, waiting)
    steps = waterfall_order(frame(con, "run_steps", {"run_id": run_id}))
    writes = frame(con, "run_writes", {"run_id": run_id})
    row = summary.iloc[0]
    return RunView(row, steps, writes, run_log_records(con, run_id, str(row["trace_id"])))


def _why_no_run(con: Connection, trace_id: str) -> str:
    """What to say of a trace that has spans but no run (SPEC §9, a trace without its root)."""
    found = frame(con, "trace_waiting", {"trace_id": trace_id}).iloc[0]
    spans = int(found["spans"])
    if not spans:
        return ""
    stored = f": its trace has {spans} span{'s' if spans != 1 else ''} stored but no run yet"
    if bool(found["pending"]):
        return stored + " (they are not derived yet: try again in a few seconds)"
    if pd.isna(found["waiting_since"]):
        return stored
    since = pd.Timestamp(found["waiting_since"]).tz_convert("UTC").strftime("%Y-%m-%d %H:%M:%S")
    return (stored + f"; its root span has not arrived. It is measured from its earliest span "
            f"once none of its spans has arrived for the grace period (serve --root-grace, "
            f"default 5 min; ingest --root-grace, default 0); the last arrived at {since} UTC")


def run_log_records(con: Connection, run_id: str, trace_id: str,
                    limit: int = LOG_RECORDS_SHOWN + 1) -> pd.DataFrame:
    """The run's trace's log records by time (one more than shown, to say there are more).
    On ClickHouse they come from the Collector's otel_logs, when its logs pipeline has made
    one; without that table there are none."""
    if getattr(con, "dialect", "duckdb") == "clickhouse" and \
            con.scalar("EXISTS TABLE otel_logs") != 1:  # type: ignore[union-attr]
        return pd.DataFrame(columns=list(LOG_COLUMNS))
    return frame(con, "run_log_records", {"run_id": run_id, "trace_id": trace_id,
                                          "limit": limit})


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


# OTLP SeverityNumber ranges (logs.proto): 1-4 TRACE, 5-8 DEBUG, 9-12 INFO, 13-16 WARN,
# 17-20 ERROR, 21-24 FATAL.
_SEVERITY_RANGES = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
# Characters of a log record's body shown in the run view (the stored body is whole).
LOG_BODY_CHARS = 300


def severity_label(number: object, text: object) -> str:
    """The record's own severity text when it has one, else its number's range name."""
    if isinstance(text, str) and text.strip():
        return text.strip()
    if number is None or pd.isna(number) or not 1 <= int(number) <= 24:  # type: ignore[arg-type]
        return ""
    return _SEVERITY_RANGES[(int(number) - 1) // 4]  # type: ignore[arg-type]


def short_body(body: object) -> str:
    text = "" if body is None or (isinstance(body, float) and pd.isna(body)) else str(body)
    return text if len(text) <= LOG_BODY_CHARS else text[:LOG_BODY_CHARS - 1] + "…"
