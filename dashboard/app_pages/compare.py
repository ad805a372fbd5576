"""Compare a run with a healthy one of its agent: `?run=<id>` against the typical run of the
period (the median-utilisation completed run), or `?run=<id>&with=<id>` against a chosen one.
UI only: the choice and the alignment of the two runs' steps are queries.run_compare."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import compare_figures, data, fmt, links, page_context, sidebar, tables
from queries import run_compare
from queries.run_view import RunNotFound

ctx = page_context.current()
st.title("Compare runs")

run_id = st.query_params.get("run", "").strip().lower()
chosen = st.query_params.get("with", "").strip().lower()
if not run_id:
    st.info("Open a run in the run view and follow its “Compare with a typical run” link, or "
            "give one in the address: `compare?run=<run id>` (against the typical run of its "
            "agent) or `compare?run=<run id>&with=<run id>`.")
    st.stop()

sidebar.write_url(ctx.state, {"run": run_id, **({"with": chosen} if chosen else {})},
                  owned=frozenset({"run", "with"}))
try:
    view = data.run_view(run_id)
except RunNotFound as error:
    st.error(fmt.escape_md(str(error)))
    st.stop()
run = view.summary
agent = run["agent"]
# Around the run's own start, not the sidebar's range: a run from last month reviewed under
# "Last 7 days" is compared with runs of its own time.
typical, runs = run_compare.typical_around(int(run["start_ns"]), agent, str(run["run_id"]),
                                           lambda filters: data.report("runs", filters))
period = typical.window

# The picker: the typical run first, then every other run of the agent in the period.
same_agent = runs[(runs["agent"].isna() if fmt.missing(agent) else runs["agent"] == agent)
                  & (runs["run_id"] != run["run_id"])]
options = ([typical.run_id] if typical.run_id else []) + [
    other for other in same_agent.sort_values("start", ascending=False)["run_id"]
    if other != typical.run_id]
if chosen and chosen not in options:
    options.insert(0, chosen)  # a run named by the link but outside the period
described = dict(zip(same_agent["run_id"], same_agent.apply(
    lambda r: f"{r['run_id']} · {fmt.text(r['outcome'])} · {fmt.percent(r['utilisation'])} · "
              f"{str(r['start'])[:16].replace('T', ' ')}", axis=1), strict=True)) \
    if not same_agent.empty else {}


def _label(option: str) -> str:
    text = described.get(option, option)
    return f"typical: {text}" if option == typical.run_id else text


def _pick() -> None:  # a callback: the URL must say the pick before the page redraws
    picked = st.session_state.get("compare_with")
    if picked and picked != typical.run_id:
        st.query_params["with"] = picked
    elif "with" in st.query_params:
        del st.query_params["with"]


other_id = chosen or typical.run_id
if options:
    st.selectbox(f"Compare with (runs of the same agent in {period})", options,
                 index=options.index(other_id) if other_id in options else 0,
                 key="compare_with", format_func=_label, on_change=_pick,
                 help="The typical run is the median-utilisation completed run of the agent "
                      "around this run's start (the lower middle one of an even count): the "
                      "week around it, else the month, else all time; not the sidebar's "
                      "range.")
if not other_id:
    st.warning(fmt.escape_md(f"Nothing to compare with: {typical.reason} ({period}). Name "
                             "a run with `&with=<run id>`."))
    st.stop()
try:
    other_view = data.run_view(other_id)
except RunNotFound as error:
    st.error(fmt.escape_md(str(error)))
    st.stop()
other = other_view.summary
is_typical = other_id == typical.run_id
other_name = "typical run" if is_typical else "chosen run"

st.caption(fmt.escape_md(
    f"This run {run['run_id']} (agent {fmt.text(agent)}) against the {other_name} "
    f"{other['run_id']}" + (f": {typical.reason} of this agent in {period}, utilisation "
                            f"{fmt.percent(typical.median_utilisation)}." if is_typical else ".")))
left, right = st.columns(2)
left.page_link(links.RUN_PAGE, label="Run view of this run", icon=":material/search:",
               query_params=links.run_params(str(run["run_id"]), ctx.state))
right.page_link(links.RUN_PAGE, label=f"Run view of the {other_name}",
                icon=":material/search:",
                query_params=links.run_params(str(other["run_id"]), ctx.state))


def _signed(ms: object) -> str:
    """A difference in time: `+1.2 s` when this run spent more, `−1.2 s` when less."""
    if fmt.missing(ms):
        return fmt.NO_VALUE
    return ("+" if float(ms) > 0 else "") + fmt.duration(ms)  # type: ignore[arg-type]


def _headline(summary: pd.Series, steps: pd.DataFrame) -> list[str]:
    return [fmt.text(summary["outcome"]),
            fmt.NO_VALUE if fmt.missing(summary["exhausted"])
            else ("yes" if summary["exhausted"] else "no"),
            fmt.duration(summary["budget_ms"]), fmt.duration(summary["elapsed_ms"]),
            fmt.percent(summary["utilisation"]), fmt.count(len(steps)),
            fmt.duration(summary["unattributed_ms"])]


st.subheader("The two runs")
tables.table(pd.DataFrame({
    "": ["outcome", "exhausted", "budget", "elapsed", "utilisation", "steps", "unattributed"],
    "this run": _headline(run, view.steps),
    other_name: _headline(other, other_view.steps),
    "difference": ["", "", _signed(run["budget_ms"] - other["budget_ms"]),
                   _signed(run["elapsed_ms"] - other["elapsed_ms"]),
                   fmt.NO_VALUE if fmt.missing(run["utilisation"])
                   or fmt.missing(other["utilisation"])
                   else f"{(run['utilisation'] - other['utilisation']) * 100:+.1f} pp",
                   f"{len(view.steps) - len(other_view.steps):+d}",
                   _signed(run["unattributed_ms"] - other["unattributed_ms"])],
}), hide_index=True, key="compare_headline")

aligned = run_compare.align_steps(view.steps, other_view.steps)
by_key = run_compare.compare_by_key(aligned)
if by_key.empty:
    st.info("Neither run has steps.")
    st.stop()

st.subheader("Where the time went differently")
st.caption("Per step key, summed over its steps; differences are this run − the "
           f"{other_name} (positive: this run spent more). Largest consumption difference "
           "first. Consumption is a step's share of the run's active time (docs/metrics.md §4).")
st.plotly_chart(compare_figures.consumption_by_key(by_key, "this run", other_name),
                key="compare_chart")
other_short = "typical" if is_typical else "chosen"


def _labels(names: dict[str, str]) -> dict[str, object]:
    """Short headers (the frame keeps its long column names): at 1400 px the two tables must
    fit without a horizontal scroll, and "consumption (typical run)" three times does not."""
    return {column: st.column_config.Column(
        shown, help=column,
        # Fixed widths for the texts the grid would size by its first rows only (a later
        # "upstream_error" or "only in the other run" was cut); numbers shown as text
        # (durations, counts) right-aligned like numbers.
        width=120 if column.startswith("class") else 160 if column == "in" else None,
        alignment=None if column in ("step key", "in") or column.startswith("class")
        else "right")
        for column, shown in names.items()}


key_table = pd.DataFrame({
    "step key": by_key["step_key"],
    "in": by_key["present"],
    "steps (this run)": by_key["steps_run"].map(fmt.count),
    f"steps ({other_name})": by_key["steps_other"].map(fmt.count),
    "consumption (this run)": by_key["consumption_ms_run"].map(fmt.duration),
    f"consumption ({other_name})": by_key["consumption_ms_other"].map(fmt.duration),
    "consumption difference": by_key["consumption_ms_diff"].map(_signed),
    "duration (this run)": by_key["duration_ms_run"].map(fmt.duration),
    f"duration ({other_name})": by_key["duration_ms_other"].map(fmt.duration),
    "duration difference": by_key["duration_ms_diff"].map(_signed),
})
key_labels = _labels({
    "step key": "step key", "in": "in",
    "steps (this run)": "steps: this", f"steps ({other_name})": f"steps: {other_short}",
    "consumption (this run)": "consumption: this",
    f"consumption ({other_name})": f"consumption: {other_short}",
    "consumption difference": "Δ consumption",
    "duration (this run)": "duration: this", f"duration ({other_name})": f"duration: {other_short}",
    "duration difference": "Δ duration"})
tables.table(key_table, hide_index=True, key="compare_by_key", column_config=key_labels,
             column_order=list(key_table.columns[:7]),
             height=tables.table_height(len(key_table)))
only_run = by_key[by_key["present"] == run_compare.ONLY_RUN]["step_key"]
only_other = by_key[by_key["present"] == run_compare.ONLY_OTHER]["step_key"]
st.markdown(
    "**Step keys only in this run:** " + (", ".join(fmt.escape_md(k) for k in only_run)
                                          or fmt.NO_VALUE) + "  \n"
    f"**Step keys only in the {other_name}:** "
    + (", ".join(fmt.escape_md(k) for k in only_other) or fmt.NO_VALUE))

st.subheader("Step by step")
st.caption("Steps matched by step key and order of occurrence (the 2nd model call of one run "
           "beside the 2nd of the other), in this run's order; steps of the other run without "
           "a match come last.")
step_table = pd.DataFrame({
    "step key": aligned["step_key"],
    "nth": aligned["occurrence"].map(fmt.count),
    "class (this run)": aligned["step_class_run"].map(fmt.text),
    f"class ({other_name})": aligned["step_class_other"].map(fmt.text),
    "in": aligned["present"],
    "start (this run)": aligned["offset_ms_run"].map(
        lambda v: fmt.NO_VALUE if fmt.missing(v) else f"+{fmt.duration(v)}"),
    f"start ({other_name})": aligned["offset_ms_other"].map(
        lambda v: fmt.NO_VALUE if fmt.missing(v) else f"+{fmt.duration(v)}"),
    "duration (this run)": aligned["duration_ms_run"].map(fmt.duration),
    f"duration ({other_name})": aligned["duration_ms_other"].map(fmt.duration),
    "duration difference": aligned["duration_ms_diff"].map(_signed),
    "consumption (this run)": aligned["consumption_ms_run"].map(fmt.duration),
    f"consumption ({other_name})": aligned["consumption_ms_other"].map(fmt.duration),
    "consumption difference": aligned["consumption_ms_diff"].map(_signed),
})
step_labels = _labels({
    "step key": "step key", "nth": "nth of key", "in": "in",
    "class (this run)": "class: this", f"class ({other_name})": f"class: {other_short}",
    "start (this run)": "start: this", f"start ({other_name})": f"start: {other_short}",
    "duration (this run)": "duration: this", f"duration ({other_name})": f"duration: {other_short}",
    "duration difference": "Δ duration",
    "consumption (this run)": "consumption: this",
    f"consumption ({other_name})": f"consumption: {other_short}",
    "consumption difference": "Δ consumption"})
step_height = tables.table_height(len(step_table), most=60)
tables.table(step_table, hide_index=True, key="compare_steps", column_config=step_labels,
             column_order=["step key", "nth", "in", "class (this run)", f"class ({other_name})",
                           "duration (this run)", f"duration ({other_name})",
                           "duration difference"], height=step_height)
with st.expander("When each step started, and its consumption (its share of the run's active "
                 "time)"):
    tables.table(step_table, hide_index=True, key="compare_steps_more",
                 column_config=step_labels,
                 column_order=["step key", "nth", "start (this run)", f"start ({other_name})",
                               "consumption (this run)", f"consumption ({other_name})",
                               "consumption difference"], height=step_height)
with st.expander("Wall-clock duration per step key (parallel steps overlap, so these need not "
                 "add up to the run's elapsed time)"):
    tables.table(key_table, hide_index=True, key="compare_by_key_durations",
                 column_config=key_labels,
                 column_order=["step key", "in", *key_table.columns[7:]],
                 height=tables.table_height(len(key_table)))
