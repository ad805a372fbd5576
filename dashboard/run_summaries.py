"""Pure pandas for the run view's tables: one run's steps in waterfall order and its log
records, from queries.run_view's frames, shaped for display.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dashboard import fmt
from queries.run_view import LOG_RECORDS_SHOWN, severity_label, short_body


def run_steps_table(steps: pd.DataFrame, summary: pd.Series) -> pd.DataFrame:
    """The run view's steps table: one row per step in waterfall order."""
    budget = summary.get("budget_ms")
    share = steps["consumption_ms"] / float(budget) if not fmt.missing(budget) else np.nan
    # only an exhausted run has a culprit; elsewhere the step spent the most, nothing more
    exhausted = summary.get("exhausted")
    spender = "culprit" if not fmt.missing(exhausted) and bool(exhausted) else \
        "largest consumer"
    marks = np.where(steps["span_id"] == summary.get("culprit_span_id"), spender, "")
    marks = np.where(steps["span_id"] == summary.get("holder_span_id"),
                     np.where(marks == spender, f"{spender} + holder", "holder"), marks)
    return pd.DataFrame({
        # the step's number, as culprit and holder are named (#3, and 3.1 inside it)
        "#": steps["number"].astype(str),
        "step": ["  " * int(level) + ("└ " if level else "") + str(key)
                 for key, level in zip(steps["step_key"], steps["step_level"], strict=True)],
        "class": steps["step_class"],
        # what recognised it as a step (the conventions of docs/conventions.md: budget, otel_genai,
        # http, ...)
        "from": steps["convention"].map(fmt.text),
        "role": marks,
        "start": steps["offset_ms"].map(lambda v: f"+{fmt.duration(v)}"),
        "duration": steps["duration_ms"].map(fmt.duration),
        "share": share * 100,  # drawn as a bar with one decimal (docs/metrics.md §4)
        "allocated": steps["allocated_ms"].map(fmt.duration),
        "utilisation": steps["utilisation"].map(fmt.percent),
        # Text, with the one "no value" mark, never Python's None
        "effect status": steps["effect_status"].map(fmt.text),
        "idempotency key": steps["idempotency_key"].map(fmt.text),
        "attempt": steps["attempt"].map(lambda v: fmt.text(v if fmt.missing(v) else int(v))),
        "span id": steps["span_id"],
    })


def run_log_table(log_records: pd.DataFrame, summary: pd.Series) -> pd.DataFrame:
    """The run view's log records: time from the run's start, severity, the span (its step key
    when it is a step), body (cut short) and exception type; at most LOG_RECORDS_SHOWN."""
    shown = log_records.head(LOG_RECORDS_SHOWN)
    start = float(summary["start_ns"])
    return pd.DataFrame({
        "at": [f"{'+' if t >= start else '-'}{fmt.duration(abs(t - start) / 1e6)}"
               for t in shown["time_ns"].astype(float)],
        "severity": [severity_label(n, t) for n, t in
                     zip(shown["severity_number"], shown["severity_text"], strict=True)],
        "span": [key if isinstance(key, str) else (span if isinstance(span, str) else "–")
                 for key, span in zip(shown["step_key"], shown["span_id"], strict=True)],
        "body": shown["body"].map(short_body),
        "exception": shown["exception_type"].map(fmt.text),
    })
