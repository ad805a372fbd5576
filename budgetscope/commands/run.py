"""`budgetscope run RUN_ID`: what on-call needs about one run, in a terminal."""

from __future__ import annotations

import click
import duckdb
import pandas as pd

from budgetscope.commands.common import Fail, open_reader, output_stream
from queries import readable
from queries.run_story import tell
from queries.run_view import (
    LOG_RECORDS_SHOWN,
    RunNotFound,
    RunView,
    load_run,
    severity_label,
    short_body,
)
from queries.terminal import terminal_safe
from store import explain_trace, vocabulary


@click.command("run")
@click.argument("run_id", metavar="RUN_ID")
@click.option("--width", default=60, show_default=True, type=click.IntRange(20, 200),
              help="Characters for the waterfall's time axis.")
@click.option("--spans", "with_spans", is_flag=True,
              help="Also list every span of the run's trace with why it is, or is not, a step "
                   "(the rule that recognised it, a wrapper, one call's second span, part of a "
                   "step); see docs/conventions.md, 'When a step is missing or counted twice'.")
@click.pass_context
def run_command(context: click.Context, run_id: str, width: int, with_spans: bool) -> None:
    """Summarise run RUN_ID (a trace id, or TRACE_ID/SPAN_ID for a run below the root):
    outcome, budget and utilisation, culprit vs holder, a waterfall of the steps against the
    deadline, failures by class, and uncertain and orphan writes with their idempotency keys."""
    with open_reader(context) as con:
        try:
            view = load_run(con, run_id)
        except RunNotFound as error:
            raise Fail(str(error)) from None
        text = render_run(view, width)
        if with_spans:
            if not isinstance(con, duckdb.DuckDBPyConnection):
                raise Fail("--spans reads the spans of a DuckDB file; it is not available on a "
                           "ClickHouse backend")
            explained = explain_trace(con, str(view.summary["trace_id"]))
            text += "\n" + "\n".join(render_spans(explained)) + "\n"
    # Each field from a span is made inert where it is placed (so widths stay right); the
    # whole text once more on the way out, so a field added later cannot slip through.
    click.echo(terminal_safe(text, keep_newlines=True), nl=False, file=output_stream(context))


CLASSES = vocabulary.CLASSES


# Durations and percentages as the dashboard shows them (queries/readable.py).
_ms = readable.duration
_pct = readable.percent


def _text(value: object) -> str:
    """A value from a span, as one inert line of text."""
    return readable.NO_VALUE if readable.missing(value) else terminal_safe(str(value))


def render_run(view: RunView, width: int) -> str:
    run = view.summary
    start = pd.Timestamp(int(run["start_ns"]), unit="ns", tz="UTC")
    lines = [f"run {_text(run['run_id'])}  agent {_text(run['agent'])}  "
             f"started {start.isoformat().replace('+00:00', 'Z')}"]
    exhausted = run["exhausted"]
    story = tell(run)
    lines.append(
        f"outcome {_text(run['outcome'])}  "
        f"exhausted {readable.NO_VALUE if pd.isna(exhausted) else str(bool(exhausted)).lower()}"
        f"  budget {_ms(run['budget_ms'])}"
        # SPEC §10: say when B is a declared budget rather than the run's own
        + (" (declared)" if run.get("budget_source") == "declared" else "")
        + f"  elapsed {_ms(run['elapsed_ms'])}  "
        f"utilisation {_pct(run['utilisation'])}  overrun {_ms(run['overrun_ms'])}")
    lines.append(" ".join(part for part in (story.ending, story.exhausted_reason) if part))
    if not pd.isna(run["budget_ms"]):
        lines.append(
            f"culprit {_text(run['culprit_key'])} "
            f"({_pct(run['culprit_share'])} of the budget, {_ms(run['culprit_ms'])})  "
            f"holder {_text(run['holder_key'])} ({story.holder_role})"
            + (f"  <- {story.culprit_note}" if story.culprit_note else ""))
        lines.append(f"unattributed {_ms(run['unattributed_ms'])} (time with no step running)")
    lines.append("")
    lines.extend(_waterfall(view, width))
    lines.append("")
    counts = view.steps["step_class"].value_counts() if not view.steps.empty else pd.Series()
    lines.append("failures by class: " + ", ".join(
        f"{name} {int(counts.get(name, 0))}" for name in CLASSES))
    lines.extend(_writes(view.writes))
    lines.extend(_log_records(view))
    return "\n".join(lines) + "\n"


def _waterfall(view: RunView, width: int) -> list[str]:
    run, steps = view.summary, view.steps
    if steps.empty:
        return ["no steps"]
    s = int(run["start_ns"])
    deadline = None if pd.isna(run["deadline_ns"]) else int(run["deadline_ns"])
    end = max(int(run["latest_end_ns"]), deadline or 0, s + 1)
    scale = width / (end - s)

    def column(ns: int) -> int:
        return min(width - 1, max(0, int((ns - s) * scale)))

    keys = [_text(key) for key in steps["step_key"]]
    label_width = min(40, max(len(key) + 2 * level for key, level in
                              zip(keys, steps["step_level"], strict=True)))
    mark = f", | = deadline at +{_ms((deadline - s) / 1e6)}" if deadline else ""
    out = [f"waterfall: 0 .. +{_ms((end - s) / 1e6)}{mark}"]
    for key, step in zip(keys, steps.itertuples(index=False), strict=True):
        bar = [" "] * width
        first, last = column(int(step.start_ns)), column(int(step.end_ns))
        for i in range(first, max(first, last) + 1):
            bar[i] = "="
        if deadline is not None:
            bar[column(deadline)] = "|"
        label = ("  " * int(step.step_level) + key)[:label_width]
        consumed = ("" if pd.isna(step.consumption_ms)
                    else f"  consumed {_ms(step.consumption_ms)}")
        # what recognised the step (SPEC §9): budget, otel_genai, openinference, http, ...
        out.append(f"{label.ljust(label_width)} {_text(step.step_class):<14} "
                   f"{_text(step.convention):<13} "
                   f"[{''.join(bar)}] +{_ms(step.offset_ms)} "
                   f"{_ms(step.duration_ms)}{consumed}")
    return out


def _writes(writes: pd.DataFrame) -> list[str]:
    if writes.empty:
        return ["writes: none"]
    out = [f"writes: {len(writes)}, uncertain {int(writes['is_uncertain'].sum())}, "
           f"reconciled {int(writes['reconciled'].sum())}, orphan {int(writes['orphan'].sum())}"]
    for write in writes.itertuples(index=False):
        if not (write.is_uncertain or write.orphan):
            continue
        state = ("ORPHAN (nobody read it back)" if write.orphan
                 else f"reconciled: {_text(write.last_result)}")
        key = ("(no key)" if readable.missing(write.idempotency_key)
               else _text(write.idempotency_key))
        out.append(f"  uncertain write {_text(write.step_key)} "
                   f"+{float(write.offset_ms) / 1e3:.3f} s "
                   f"class {_text(write.step_class)} idempotency_key {key}  {state}")
    return out


def _log_records(view: RunView) -> list[str]:
    records = view.log_records
    if records.empty:
        return ["log records: none"]
    more = len(records) > LOG_RECORDS_SHOWN
    shown = records.head(LOG_RECORDS_SHOWN)
    out = [f"log records: {'more than ' if more else ''}{len(shown)}"
           + (f" (the first {LOG_RECORDS_SHOWN} shown)" if more else "")]
    start = int(view.summary["start_ns"])
    for record in shown.itertuples(index=False):
        span = record.step_key if isinstance(record.step_key, str) else record.span_id
        offset = (int(record.time_ns) - start) / 1e9
        exception = ("" if not isinstance(record.exception_type, str)
                     else f"  exception {_text(record.exception_type)}")
        severity = severity_label(record.severity_number, record.severity_text) or "-"
        where = "(no span)" if readable.missing(span) else _text(span)
        out.append(f"  {offset:+.3f} s {_text(severity):<6} {where}: "
                   f"{_text(short_body(record.body))}{exception}")
    return out


# What `--spans` shows of each span's name before the rule and the reason.
_SPAN_NAME_CHARS = 36


def render_spans(spans: pd.DataFrame) -> list[str]:
    """Every span of the trace in tree order: what it is (SPEC §9) and why, one line each."""
    names = dict(zip(spans["span_id"], spans["name"], strict=True))
    out = [f"spans: {len(spans)}, why each is or is not a step"]
    for span in spans.itertuples(index=False):
        label = ("  " * int(span.indent) + _text(span.name))[:_SPAN_NAME_CHARS]
        row = "" if readable.missing(span.step_row) else \
            f"row {_text(span.step_row)} {_text(span.convention)}"
        what = _text(span.step_key) if span.role == "step" else ""
        other = "" if readable.missing(span.other_span_id) else \
            f" ({_text(names.get(span.other_span_id, span.other_span_id))})"
        out.append(f"  {label.ljust(_SPAN_NAME_CHARS)} {span.role:<11} {row:<20} "
                   f"{what + ': ' if what else ''}{span.why}{other}")
    return out
