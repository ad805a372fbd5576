"""One run, for the on-call view: its row, its steps in waterfall order, its writes, and the
OTLP log records of its trace beside their spans (a short list, not a log search)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from queries.loader import Connection, frame
from queries.readable import missing
from queries.run_cost import with_step_costs


class RunNotFound(LookupError):
    """No run has this id; `candidates` are run ids of the same trace, or the runs an
    ambiguous prefix matches, if any; `waiting` says why a trace with stored spans has no run
    yet."""

    def __init__(self, run_id: str, candidates: list[str], waiting: str = "",
                 ambiguous: bool = False) -> None:
        if ambiguous:
            more = "…" if len(candidates) > PREFIX_CANDIDATES else ""
            message = (f"{run_id!r} is the start of more than one run id; give more of it: "
                       f"{', '.join(candidates[:PREFIX_CANDIDATES])}{more}")
        else:
            hint = f"; runs of that trace: {', '.join(candidates)}" if candidates else ""
            message = f"no run {run_id!r} in this database{hint}{waiting}"
        super().__init__(message)
        self.candidates = candidates
        self.ambiguous = ambiguous


# Candidates an ambiguous prefix lists (one more is looked up, to say there are more).
PREFIX_CANDIDATES = 10


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
    """The run `run_id`, or the one run whose id starts with it (a unique prefix, as the Runs
    page finds runs by). Raises RunNotFound, listing the candidates of an ambiguous prefix."""
    run_id = run_id.strip().lower()
    summary = frame(con, "run_summary", {"run_id": run_id})
    if summary.empty and run_id:
        matches = [str(value) for value in frame(con, "runs_by_prefix", {
            "prefix": run_id, "limit": PREFIX_CANDIDATES + 1})["run_id"]]
        if len(matches) > 1:
            raise RunNotFound(run_id, matches, ambiguous=True)
        if matches:
            run_id = matches[0]
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
    steps = with_step_costs(con, row, steps)  # each step's tokens and cost (§11)
    return RunView(row, steps, writes, run_log_records(con, run_id, str(row["trace_id"])))


def _why_no_run(con: Connection, trace_id: str) -> str:
    """What to say of a trace that has spans but no run (docs/conventions.md, "A trace
    without its root")."""
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


# Characters of one attribute or event value shown in a step's details (the stored value is
# whole, up to ingest's 64 KiB): enough for an error message, few enough for a terminal.
DETAIL_CHARS = 500
STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}


@dataclass(frozen=True)
class SpanDetails:
    """What one step's span carries beyond the derived facts: for on-call, the error text
    without another tool. Every text is the span's data as it was sent: the caller shows it as
    text (st.dataframe, st.text) or through queries.terminal, never as Markdown or HTML."""
    span_id: str
    span_name: str
    status: str  # UNSET, OK, ERROR
    status_message: str
    exception_type: str  # of the last exception event, "" without one
    exception_message: str
    attributes: list[tuple[str, str]]  # (key, value as text), in the span's order
    events: list[tuple[int, str, str]]  # (time_ns, name, attributes as text)
    dropped: str  # what ingest dropped from this span (its limits), "" when nothing


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"


def _json(text: object, default: object) -> object:
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def span_details(con: Connection, run_id: str, trace_id: str,
                 span_id: str | None = None) -> list[SpanDetails]:
    """The details of the run's step spans (only `span_id`'s when given), by start."""
    rows = frame(con, "run_span_details", {"run_id": run_id, "trace_id": trace_id,
                                           "span_id": span_id})
    out = []
    for row in rows.itertuples(index=False):
        attributes = _json(row.attributes, {})
        events = _json(row.events, [])
        if not isinstance(attributes, dict):
            attributes = {}
        if not isinstance(events, list):
            events = []
        exception_type = exception_message = ""
        shown_events = []
        for event in events:
            if not isinstance(event, dict):
                continue
            values = event.get("attributes")
            values = values if isinstance(values, dict) else {}
            if event.get("name") == "exception":
                exception_type = _shown(values.get("exception.type", "")) or exception_type
                exception_message = (_shown(values.get("exception.message", ""))
                                     or exception_message)
            shown_events.append((int(event.get("time_ns") or 0), _shown(event.get("name", "")),
                                 ", ".join(f"{k}={_shown(v)}" for k, v in values.items()
                                           if k != "exception.stacktrace")))
        dropped = [f"{int(n):,} {what}" for n, what in (
            (row.dropped_attributes_count, "attributes"), (row.dropped_events_count, "events"))
            if not missing(n) and int(n)]
        out.append(SpanDetails(
            str(row.span_id), str(row.span_name),
            STATUS_NAMES.get(int(row.status_code), str(row.status_code)),
            "" if missing(row.status_message) else _shown(row.status_message),
            exception_type, exception_message,
            [(str(key), _shown(value)) for key, value in attributes.items()],
            shown_events, " and ".join(dropped) + " dropped at ingest" if dropped else ""))
    return out


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
    index scan for a full scan of steps (22 ms → see bench/bench_queries.py).

    `number` names each step as the runs table numbers culprit and holder (docs/metrics.md
    §4): a top-level step's rank by start among the run's top-level steps (ties: the smaller
    span id), from 1; a nested step `3.2`, the 2nd step inside top-level step 3."""
    if steps.empty:
        return steps.assign(number=pd.Series(dtype=object))
    top = steps["is_top_level"].astype(bool)
    top_start = steps["start_ns"].where(top)
    keyed = steps.assign(
        _top_start=top_start.groupby(steps["top_step_id"]).transform("max"),
        _nested=~top)
    ordered = (keyed.sort_values(["_top_start", "top_step_id", "_nested", "start_ns",
                                  "step_level", "span_id"], kind="stable")
               .drop(columns=["_top_start", "_nested"]).reset_index(drop=True))
    # Top-level steps come in (start, span id) order here, the derivation's numbering order.
    is_top = ordered["is_top_level"].astype(bool)
    rank = is_top.cumsum()
    inside = (~is_top).astype(int).groupby(rank).cumsum()
    ordered["number"] = [str(r) if top_row else f"{r}.{i}"
                         for r, i, top_row in zip(rank, inside, is_top, strict=True)]
    return ordered


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
