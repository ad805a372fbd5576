"""`budgetscope run RUN_ID`: what on-call needs about one run, in a terminal.

The same answers as the dashboard's run view, in the same words (queries/run_story.py): what
happened, who spent and who held (with their step numbers), failures by class, uncertain and
orphan writes with their idempotency keys, and one next step; then a waterfall of the steps
against the deadline, and the run's log records. Every line fits the width (the terminal's, at
least 80 columns): sentences wrap, table rows are cut.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass

import click
import duckdb
import pandas as pd

from budgetscope.commands import links
from budgetscope.commands.common import open_reader, output_stream, terminal_width, width_option
from budgetscope.commands.links import dashboard_url_option
from budgetscope.fail import Fail
from queries import readable, run_cost, run_story
from queries.loader import TooManyRows
from queries.reports import runs as runs_report
from queries.run_compare import typical_around
from queries.run_story import tell
from queries.run_view import (
    LOG_RECORDS_SHOWN,
    RunNotFound,
    RunView,
    SpanDetails,
    load_run,
    severity_label,
    short_body,
    span_details,
)
from queries.terminal import terminal_safe
from store import explain_trace


@click.command("run")
@click.argument("run_id", metavar="RUN_ID")
@width_option("Characters a line may take (a link is never cut).")
@click.option("--spans", "with_spans", is_flag=True,
              help="Also show each step's details (status and status message, exception type "
                   "and message, attributes, events), and list every span of the run's trace "
                   "with why it is, or is not, a step (the rule that recognised it, a wrapper, "
                   "one call's second span, part of a step); see docs/conventions.md, 'When a "
                   "step is missing or counted twice'.")
@dashboard_url_option
@click.pass_context
def run_command(context: click.Context, run_id: str, width: int | None,
                with_spans: bool, dashboard_url: str | None) -> None:
    """Summarise run RUN_ID (a trace id, or TRACE_ID/SPAN_ID for a run below the root; a
    unique start of one is enough, an ambiguous one lists the runs it matches): what
    happened, who spent and who held the budget, failures by class, uncertain and orphan writes
    with their idempotency keys, one next step, and a waterfall of the steps against the
    deadline (docs/metrics.md §3–§6)."""
    width = width or terminal_width()
    with open_reader(context) as con:
        try:
            view = load_run(con, run_id)
        except RunNotFound as error:
            raise Fail(str(error)) from None
        run = view.summary
        try:
            typical, _ = typical_around(int(run["start_ns"]), run["agent"],
                                        str(run["run_id"]),
                                        lambda filters: runs_report(con, filters))
            comparable = typical.run_id is not None
        except TooManyRows:
            # Through serve's read API, all time of a large agent is more than one command
            # reads: whether a typical run exists is not known, and Compare stays offered
            # (the comparison page makes its own search).
            comparable = True
        leads = Leads(links.source(context), links.dashboard_url(context, dashboard_url),
                      comparable)
        text = render_run(view, width, leads)
        if with_spans:
            if not isinstance(con, duckdb.DuckDBPyConnection):
                raise click.UsageError("--spans reads the spans of a DuckDB file; it is not "
                                       "available on a ClickHouse backend")
            run, trace = str(view.summary["run_id"]), str(view.summary["trace_id"])
            details = span_details(con, run, trace)
            explained = explain_trace(con, trace)
            text += ("\n" + "\n".join(render_details(view, details, width)) + "\n\n"
                     + "\n".join(render_spans(explained, width)) + "\n")
    # Each field from a span is made inert where it is placed (so widths stay right); the
    # whole text once more on the way out, so a field added later cannot slip through.
    click.echo(terminal_safe(text, keep_newlines=True), nl=False, file=output_stream(context))


@dataclass(frozen=True)
class Leads:
    """Where the summary leads: the database its commands name (--db FILE or --backend URL),
    the dashboard's address (None: unknown, no link), and whether a typical run exists to
    compare with."""
    source: tuple[str, str] = ("--db", "budgetscope.duckdb")
    dashboard: str | None = None
    typical: bool = False


# Durations and percentages as the dashboard shows them (queries/readable.py).
_ms = readable.duration
_pct = readable.percent


def _text(value: object) -> str:
    """A value from a span, as one inert line of text."""
    return readable.NO_VALUE if readable.missing(value) else terminal_safe(str(value))


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width - 1] + "…"


# A number and its unit ("25.0 s", "1 min 3 s") stay on one line when a sentence wraps.
_NUMBER_UNIT = re.compile(r"(\d) (ms|s|min|h)\b")
_KEEP = "\u00a0"


def _wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    kept = _NUMBER_UNIT.sub(lambda m: f"{m.group(1)}{_KEEP}{m.group(2)}", terminal_safe(text))
    return [line.replace(_KEEP, " ") for line in textwrap.wrap(
        kept, width=width, initial_indent=first, subsequent_indent=rest,
        break_on_hyphens=False)]


_LABEL_WIDTH = 15
# The least room a waterfall row's bar is given before names are cut.
BAR_ROOM = 16


def _said(label: str, text: str, width: int) -> list[str]:
    """`label` then `text` wrapped to `width`, continued under the text."""
    return _wrap(text, width, f"{label:<{_LABEL_WIDTH}}", " " * _LABEL_WIDTH) or [label]


def _fact(label: str, value: str) -> str:
    """`label value` as one unbreakable piece: a wrapped line never leaves a label at the end
    of one line and its value at the start of the next ("started" / "2026-11-24 …")."""
    return f"{label} {value}".replace(" ", _KEEP)


def command_lines(arguments: list[str], width: int, indent: int = _LABEL_WIDTH) -> list[str]:
    """A shell command over as many lines as `width` needs, each but the last ending in ` \\`
    (so that it pastes as one command), continued two characters further in."""
    words = [shlex.quote(terminal_safe(word)) for word in arguments]
    lines: list[str] = []
    line = " " * indent + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = " " * (indent + 2) + word
        else:
            line += " " + word
    return [*lines, line]


def render_run(view: RunView, width: int, leads: Leads | None = None) -> str:
    leads = leads or Leads()
    run = view.summary
    story = tell(run)
    lines = _wrap("  ".join([
        _fact("run", _text(run["run_id"])), _fact("agent", _text(run["agent"])),
        _fact("started", readable.timestamp_ns(run["start_ns"]))]), width)
    exhausted = run["exhausted"]
    said = readable.NO_VALUE if pd.isna(exhausted) else str(bool(exhausted)).lower()
    facts = [_fact("outcome", _text(run["outcome"])), _fact("exhausted", said),
             # docs/metrics.md §10: say when B is a declared budget rather than the run's own
             _fact("budget", _ms(run["budget_ms"])
                   + (" (declared)" if run.get("budget_source") == "declared" else "")),
             _fact("elapsed", _ms(run["elapsed_ms"])),
             _fact("utilisation", _pct(run["utilisation"])),
             _fact("overrun", _ms(run["overrun_ms"]))]
    lines.extend(line.replace(_KEEP, " ") for line in textwrap.wrap(
        "  ".join(facts), width=width, break_on_hyphens=False))
    if bool(run.get("root_missing")):
        lines.extend(_said("Note", "The root span never arrived: the run is measured from its "
                                   "earliest span.", width))
    if leads.dashboard:
        # A link is never cut or wrapped: a terminal makes it clickable only whole; too long
        # for the line beside its label, it has a line of its own.
        address = links.page_url(leads.dashboard, "run", {"run": str(run["run_id"])})
        said = f"{'Run view':<{_LABEL_WIDTH}}{address}"
        lines.extend([said] if len(said) <= width else ["Run view", address])
    lines.append("")
    step = run_story.next_step(run, view.steps, view.writes, leads.typical)
    for label, text in summary_block(view, story, step):
        lines.extend(_said(label, text, width))
    for arguments in step.commands:
        lines.extend(command_lines(["budgetscope", *leads.source, *arguments], width))
    if leads.dashboard and step.what_if:
        lines.append(f"{'':<{_LABEL_WIDTH}}" + links.page_url(
            leads.dashboard, "simulate", step.what_if_params()))
    lines.append("")
    lines.extend(cost_block(view, width))
    lines.extend(_waterfall(view, story, width))
    lines.extend(_log_records(view, width))
    return "\n".join(lines) + "\n"


def summary_block(view: RunView, story: run_story.RunStory,
                  step: run_story.NextStep | None = None) -> list[tuple[str, str]]:
    """The four answers and the next step, as (label, sentence) pairs."""
    run = view.summary
    out = [("Who spent" if label.startswith("Who spent") else label, text)
           for label, text in run_story.answers(run, story, view.steps, view.writes)]
    if not readable.missing(run.get("unattributed_ms")):
        out.insert(2 if len(out) > 3 else 1,
                   ("Unattributed", f"{_ms(run['unattributed_ms'])} (time with no step "
                                    "running)"))
    # one line a write: the key is what on-call reads back, never lost in a paragraph
    out.extend(("", note.sentence())
               for note in run_story.uncertain_writes(view.writes, view.steps))
    step = step or run_story.next_step(run, view.steps, view.writes)
    out.append(("Next step", step.text))
    return out


def _waterfall(view: RunView, story: run_story.RunStory, width: int) -> list[str]:
    run, steps = view.summary, view.steps
    if steps.empty:
        return ["no steps"]
    s = int(run["start_ns"])
    deadline = None if pd.isna(run["deadline_ns"]) else int(run["deadline_ns"])
    end = max(int(run["latest_end_ns"]), deadline or 0, s + 1)
    spender = "C" if story.spender == run_story.CULPRIT else "L"
    marks = {}
    for span_id, mark in ((run.get("holder_span_id"), "H"), (run.get("culprit_span_id"),
                                                              spender)):
        if not readable.missing(span_id):
            marks[span_id] = mark + marks.get(span_id, "")
    numbers = [f"#{n}" for n in steps["number"]]
    labels = ["  " * int(level) + _text(key)
              for key, level in zip(steps["step_key"], steps["step_level"], strict=True)]
    classes = [_text(c) for c in steps["step_class"]]
    conventions = [_text(v) for v in steps["convention"]]
    starts = [f"+{_ms(v)}" for v in steps["offset_ms"]]
    durations = [_ms(v) for v in steps["duration_ms"]]
    n_w = max(len(n) for n in numbers)
    c_w = max(len(c) for c in classes)
    s_w, d_w = max(len(t) for t in starts), max(len(t) for t in durations)
    fixed = 3 + n_w + 1 + 1 + 3 + s_w + 1 + d_w + 2 + c_w  # mark, number, bar's [ ], times, class
    # Names get the width before the recogniser (what on-call reads first): the column of
    # what recognised each step (docs/conventions.md) shows only when whole names fit beside a
    # bar of BAR_ROOM; past that the names are cut, never below 12 characters.
    wanted = min(max(len(label) for label in labels), 36)
    recogniser_w = 2 + max(len(v) for v in conventions)
    show_recogniser = width - fixed - recogniser_w - wanted >= BAR_ROOM
    if show_recogniser:
        fixed += recogniser_w
    label_w = min(wanted, max(12, width - fixed - BAR_ROOM))
    bar_w = max(10, width - fixed - label_w)
    classes = [f"{c:<{c_w}}" + (f"  {v}" if show_recogniser else "")
               for c, v in zip(classes, conventions, strict=True)]
    scale = bar_w / (end - s)

    def column(ns: int) -> int:
        return min(bar_w - 1, max(0, int((ns - s) * scale)))

    legend = [f"{spender} = {story.spender} {story.culprit}" if story.culprit else "",
              f"H = holder {story.holder}" if story.holder else "",
              f"| = deadline at +{_ms((deadline - s) / 1e6)}" if deadline else ""]
    out = _wrap(f"Steps, 0 .. +{_ms((end - s) / 1e6)}: " + ", ".join(p for p in legend if p),
                width, rest="  ")
    for i, step in enumerate(steps.itertuples(index=False)):
        bar = [" "] * bar_w
        first, last = column(int(step.start_ns)), column(int(step.end_ns))
        # A step that failed, was refused or cancelled is marked whatever its width: a 0 ms
        # refusal or a 9 ms upstream failure would otherwise draw one "=" or nothing apart.
        fill = "=" if step.step_class == "ok" else "x"
        for j in range(first, max(first, last) + 1):
            bar[j] = fill
        if deadline is not None and bar[column(deadline)] != "x":
            bar[column(deadline)] = "|"
        mark = marks.get(step.span_id, "")
        label = labels[i] if len(labels[i]) <= label_w else labels[i][:label_w - 1] + "…"
        out.append(_cut(f"{mark:<2} {numbers[i]:>{n_w}} {label:<{label_w}} [{''.join(bar)}] "
                        f"{starts[i]:>{s_w}} {durations[i]:>{d_w}}  {classes[i]}", width)
                   .rstrip())
    if not show_recogniser:
        out.append("(what recognised each step: --width "
                   f"{fixed + recogniser_w + wanted + BAR_ROOM} or --spans)")
    out.append("")
    return out


def _log_records(view: RunView, width: int) -> list[str]:
    records = view.log_records
    if records.empty:
        return ["Log records: none"]
    more = len(records) > LOG_RECORDS_SHOWN
    shown = records.head(LOG_RECORDS_SHOWN)
    out = [f"Log records: {'more than ' if more else ''}{len(shown)}"
           + (f" (the first {LOG_RECORDS_SHOWN} shown)" if more else "")]
    start = int(view.summary["start_ns"])
    for record in shown.itertuples(index=False):
        span = record.step_key if isinstance(record.step_key, str) else record.span_id
        offset = (int(record.time_ns) - start) / 1e6
        at = ("+" if offset >= 0 else "−") + _ms(abs(offset))
        exception = ("" if not isinstance(record.exception_type, str)
                     else f"  exception {_text(record.exception_type)}")
        severity = severity_label(record.severity_number, record.severity_text) or "-"
        where = "(no span)" if readable.missing(span) else _text(span)
        out.extend(_wrap(f"{at:>9} {_text(severity):<6} {where}: "
                         f"{_text(short_body(record.body))}{exception}", width, "  ",
                         " " * 19))
    return out


# What `--spans` shows of each span's name before the rule and the reason.
_SPAN_NAME_CHARS = 36


def render_spans(spans: pd.DataFrame, width: int) -> list[str]:
    """Every span of the trace in tree order: what it is (docs/conventions.md) and why, one
    entry each, wrapped to `width`."""
    names = dict(zip(spans["span_id"], spans["name"], strict=True))
    out = [f"Spans: {len(spans)}, why each is or is not a step"]
    for span in spans.itertuples(index=False):
        label = ("  " * int(span.indent) + _text(span.name))[:_SPAN_NAME_CHARS]
        row = "" if readable.missing(span.step_row) else \
            f"row {_text(span.step_row)} {_text(span.convention)}"
        what = _text(span.step_key) if span.role == "step" else ""
        other = "" if readable.missing(span.other_span_id) else \
            f" ({_text(names.get(span.other_span_id, span.other_span_id))})"
        out.extend(_wrap(f"{label.ljust(_SPAN_NAME_CHARS)} {span.role:<11} {row:<20} "
                         f"{what + ': ' if what else ''}{_text(span.why)}{other}", width, "  ",
                         " " * 6))
    return out


def render_details(view: RunView, details: list[SpanDetails], width: int) -> list[str]:
    """Each step's span as it was sent: status and status message, exception type and
    message, attributes and events, so that on-call needs no other tool for the error
    text. Every value is the span's data: made inert (terminal_safe) and wrapped, never cut."""
    numbers = dict(zip(view.steps["span_id"], view.steps["number"], strict=True))
    keys = dict(zip(view.steps["span_id"], view.steps["step_key"], strict=True))
    start = int(view.summary["start_ns"])
    out = [f"Step details: {readable.plural(len(details), 'step')}"]
    for span in details:
        out.append("")
        out.extend(_wrap(f"#{numbers.get(span.span_id, '?')} {_text(keys.get(span.span_id))}"
                         f"  span {_text(span.span_name)} ({span.span_id})  status "
                         f"{span.status}", width, "", "  "))
        for label, value in (("status message", span.status_message),
                             ("exception", " ".join(part for part in (
                                 span.exception_type, span.exception_message) if part))):
            if value:
                out.extend(_wrap(f"{label}: {_text(value)}", width, "  ", "    "))
        for key, value in span.attributes:
            out.extend(_wrap(f"{_text(key)} = {_text(value)}", width, "  ", "    "))
        for time_ns, name, values in span.events:
            at = f"+{_ms((time_ns - start) / 1e6)}" if time_ns else readable.NO_VALUE
            out.extend(_wrap(f"event {at} {_text(name)}" + (f": {_text(values)}" if values
                                                             else ""), width, "  ", "    "))
        if span.dropped:
            out.extend(_wrap(span.dropped, width, "  ", "    "))
    return out


# ---- tokens and dollars (docs/metrics.md §11.9) ------------------------------------------------

# Steps listed under "Cost by step": enough for the calls that matter in a terminal; the
# dashboard's run view lists them all.
STEP_COSTS_SHOWN = 20


def cost_block(view: RunView, width: int) -> list[str]:
    """Spent of budget, over by, the cost culprit and the crosser, the tokens, then each step
    with usage and its cost (queries/run_cost.py says it in words); nothing for a run with no
    usage and no dollar or token budget. Ends with a blank line when not empty."""
    run = view.summary
    if not run_cost.worth_telling(run, view.steps):
        return []
    lines: list[str] = []
    for label, text in run_cost.cost_answers(run):
        lines.extend(_said(label, text, width))
    lines.extend(_step_cost_lines(run_cost.step_costs(view.steps), width))
    lines.append("")
    return lines


def _step_cost_lines(rows: list[run_cost.StepCost], width: int) -> list[str]:
    """The steps with usage as a small table: number, step key (cut to fit), tokens, cost and
    where the cost came from."""
    if not rows:
        return []
    shown = rows[:STEP_COSTS_SHOWN]
    numbers = [f"#{row.number}" for row in shown]
    keys = ["  " * row.level + _text(row.key) for row in shown]
    n_w = max(len(n) for n in numbers)
    t_w = max(len("tokens"), *(len(row.tokens) for row in shown))
    c_w = max(len("cost"), *(len(row.cost) for row in shown))
    s_w = max(len(row.source) for row in shown)
    fixed = 2 + n_w + 1 + 2 + t_w + 2 + c_w + 2 + s_w
    key_w = min(max(len(key) for key in keys), max(12, width - fixed))
    more = len(rows) - len(shown)
    out = [f"{'Cost by step':<{_LABEL_WIDTH}}"
           + (f"the first {len(shown)} of {len(rows)} steps with usage" if more else
              readable.plural(len(rows), "step") + " with usage"),
           _cut(f"  {'':>{n_w}} {'step':<{key_w}}  {'tokens':>{t_w}}  {'cost':>{c_w}}  from",
                width)]
    for number, key, row in zip(numbers, keys, shown, strict=True):
        key = key if len(key) <= key_w else key[:key_w - 1] + "…"
        out.append(_cut(f"  {number:>{n_w}} {key:<{key_w}}  {row.tokens:>{t_w}}  "
                        f"{row.cost:>{c_w}}  {row.source}", width).rstrip())
    if more:
        out.append(f"  ({readable.plural(more, 'more step')} with usage: the dashboard's run "
                   "view lists them all)")
    return out
