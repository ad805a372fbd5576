"""What if: the stored runs replayed under other caps for any model, tool, queue or subagent
step (capped in the record or not), another run deadline, a minimum budget to start a call,
retries on or off; predicted beside actual. The whole policy is in the page's address
(dashboard/simulate_params.py), written as the sliders move and restored from a link. The
numbers come from simulation.replay through dashboard/data.py (the same function as
`budgetscope simulate`); this page only turns widgets into a policy and draws the result."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from dashboard import (
    data,
    fmt,
    links,
    notices,
    page_context,
    sidebar,
    simulate_params,
    simulation_figures,
    tables,
)
from dashboard.metrics import Metric, headline
from simulation.policy import SimulationPolicy
from simulation.replay import recorded_caps, typical_budget_ms

DEADLINE_KEY = "sim_deadline_s"
DEADLINE_ON_KEY = "sim_deadline_on"
MIN_START_KEY = "sim_min_start_s"
RETRIES_KEY = "sim_retries"
TOOLS_SHOWN = ["step_key", "cap_ms", "calls_actual", "timeouts_actual", "timeout_rate_actual",
               "calls", "timeouts", "timeout_rate", "refused_actual", "refused",
               "calls_per_run", "run_timeout_rate_formula", "run_timeout_rate", "fit_calls"]

# The per-step table as it fits the page at 1400 px: the rates first (what the policy changes),
# the counts behind them in an expander; short headers, the report's name in each tooltip.
TOOLS_FIRST = ["step_key", "cap_ms", "timeout_rate_actual", "timeout_rate", "calls_per_run",
               "run_timeout_rate_formula", "run_timeout_rate"]
_TOOLS_HEADERS = (
    ("step_key", "step key", "kind:name of the step"),
    ("cap_ms", "cap", "the cap this policy sets for the step"),
    ("calls_actual", "calls (recorded)", "calls in the recorded runs"),
    ("timeouts_actual", "timeouts (recorded)", "client timeouts in the recorded runs"),
    ("timeout_rate_actual", "timeout rate (recorded)", "timeouts / calls, as recorded"),
    ("calls", "calls (policy)", "calls under this policy"),
    ("timeouts", "timeouts (policy)", "client timeouts under this policy"),
    ("timeout_rate", "timeout rate (policy)", "p = timeouts / calls under this policy"),
    ("refused_actual", "refused (recorded)", "calls refused in the recorded runs"),
    ("refused", "refused (policy)", "calls refused under this policy"),
    ("calls_per_run", "calls / run", "n = calls / runs that call the step"),
    ("run_timeout_rate_formula", "1 − (1 − p)ⁿ", "the run timeout rate if calls were "
     "independent"),
    ("run_timeout_rate", "run timeout rate", "the replayed share of runs with a timeout"),
    ("fit_calls", "calls on the fit", "calls whose latency comes from the fitted model"))
# Numbers shown as text (a percentage, "–") sit right-aligned like the numbers beside them.
TOOLS_LABELS = {
    column: st.column_config.Column(
        shown, help=f"{meaning} ({column})",
        alignment=None if column in ("step_key", "cap_ms") else "right")
    for column, shown, meaning in _TOOLS_HEADERS}


def cap_key(step_key: str) -> str:
    return f"sim_cap:{step_key}"


# The summary's figures as the page names them; the CSV and `budgetscope simulate` keep the
# metric names (each figure's tooltip says which).
FIGURES = {
    "runs": "runs", "budgeted_runs": "runs with a budget", "exhausted_runs": "exhausted runs",
    "exhaustion_rate": "exhaustion rate",
    "exhaustion_rate_upper": "exhaustion rate, upper bound (runs beyond the record exhausted)",
    "utilisation_p50": "utilisation p50", "utilisation_p90": "utilisation p90",
    "utilisation_p95": "utilisation p95", "utilisation_p99": "utilisation p99",
    "calls": "calls", "client_timeouts": "client give-ups (calls cut at their cap)",
    "client_timeout_rate": "client give-up rate", "runs_with_client_timeout":
    "runs with a client give-up", "refused": "refused calls",
    "write_timeouts": "writes timing out (future reconciliations)",
    "runs_beyond_record": "runs the record ended early that get through",
}
# The kinds of steps the replay re-times as calls (simulation/prepare.py), in the order their
# caps are shown; a cap on another kind (a backoff) would change nothing.
KIND_ORDER = ("model", "tool", "queue", "subagent", "reconcile")
_LAST = "_sim_params_last"  # the policy's address parameters the page last wrote


def _slider_max(value_s: float) -> float:
    """Room to loosen as well as tighten: twice the recorded value, at least 1 s, in 0.5 s."""
    return max(1.0, math.ceil(value_s * 4) / 2)


def added_key(kind: str) -> str:
    return f"sim_add:{kind}"


ctx = page_context.current()
st.title("What if")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · the stored runs replayed under the "
           "policy below, beside what actually happened. A slider left where it starts keeps "
           "each run's own recorded value.")
if notices.no_runs_in_range(ctx):
    st.stop()

prepared = data.simulation_inputs(ctx.filters)
caps = recorded_caps(prepared)
caps = caps[caps["kind"].isin(KIND_ORDER) & caps["p95_ms"].notna()]
recorded = {str(k): float(v) for k, v in zip(caps["step_key"], caps["cap_ms"], strict=True)
            if not fmt.missing(v)}
budget_ms = typical_budget_ms(prepared)
ss = st.session_state

# The address wins when it says something new (a pasted link, the back button, the run view's
# next step) or on the page's first run; otherwise the widgets say the policy.
url, problems = simulate_params.from_params(
    {key: st.query_params.get_all(key) for key in simulate_params.KEYS})
url_params = simulate_params.to_params(url)
if url_params != ss.get(_LAST) or ctx.arrived:
    for key in [k for k in ss if isinstance(k, str) and k.startswith(("sim_cap:", "sim_add:"))]:
        del ss[key]
    unknown = [key for key, _ in url.caps if key not in set(caps["step_key"])]
    if unknown:
        problems.append("no step of " + ", ".join(unknown) + " in these runs: its cap is left "
                        "out (pick the agent and time range whose runs have it)")
    for key, ms in url.caps:
        if key in unknown:
            continue
        ss[cap_key(key)] = ms / 1000
        if key not in recorded:
            kind = key.split(":", 1)[0]
            ss[added_key(kind)] = [*ss.get(added_key(kind), []), key]
    ss[DEADLINE_ON_KEY] = url.deadline_ms is not None and not math.isnan(budget_ms)
    if url.deadline_ms is not None:
        ss[DEADLINE_KEY] = url.deadline_ms / 1000
    ss[MIN_START_KEY] = (url.min_start_ms or 0) / 1000
    ss[RETRIES_KEY] = url.retries
for problem in problems:
    st.warning(fmt.escape_md(problem))

st.subheader("Policy")
left, middle, right = st.columns(3)
deadline_s: float | None = None
with left:
    if not math.isnan(budget_ms):
        default_s = budget_ms / 1000
        # Off, the text and the policy both say "as recorded"; only a deadline that is set
        # shows a value, so a slider never shows 60.00 while each run keeps its own budget.
        if st.toggle("Set one run deadline", key=DEADLINE_ON_KEY,
                     help="On: the deadline below for every budgeted run. Off: each run keeps "
                          "its own recorded budget."):
            ss.setdefault(DEADLINE_KEY, default_s)
            deadline_s = st.slider("Run deadline (s), every budgeted run", min_value=min(
                1.0, ss[DEADLINE_KEY]), max_value=max(_slider_max(default_s), ss[DEADLINE_KEY]),
                step=0.5, key=DEADLINE_KEY,
                help=f"Starts at the most common recorded budget, {fmt.duration(budget_ms)}.")
        else:
            st.caption(fmt.escape_md(f"Run deadline: as recorded (each run's own budget; "
                                     f"the most common is {fmt.duration(budget_ms)})."))
with middle:
    ss.setdefault(MIN_START_KEY, 0.0)
    min_start_s = st.slider("Refuse a call below this budget left (s)", min_value=0.0,
                            max_value=max(10.0, ss[MIN_START_KEY]), step=0.25,
                            key=MIN_START_KEY,
                            help="Beyond the run's landing reserve, in runs that report "
                                 "budget.remaining_ms. 0: refusals as recorded.")
with right:
    ss.setdefault(RETRIES_KEY, True)
    retries = st.toggle("Retry calls cut at their cap", key=RETRIES_KEY,
                        help="On: a call that newly times out at its cap is retried (up to 3 "
                             "attempts, backoff 250 ms·2^k). Off: the recorded retries and "
                             "backoffs are dropped.")


def cap_slider(key: str, start_s: float, top_s: float) -> float:
    """A step key's cap slider, its value from the session (the address, or the user): a
    label of the key as it is (fmt.label_text), which is also the slider's accessible name."""
    ss.setdefault(cap_key(key), start_s)
    value = ss[cap_key(key)]
    return st.slider(fmt.label_text(key), min_value=min(0.1, value),
                     max_value=max(_slider_max(top_s), value), step=0.1, key=cap_key(key),
                     help=f"recorded cap {fmt.duration(recorded.get(key))}; the 95th "
                          "percentile of its calls "
                          f"{fmt.duration(caps_by_key.loc[key, 'p95_ms'])}")


cap_overrides: dict[str, int] = {}
caps_by_key = caps.set_index("step_key")
for kind in KIND_ORDER:
    of_kind = caps[caps["kind"] == kind]
    if of_kind.empty:
        continue
    capped = [key for key in of_kind["step_key"] if key in recorded]
    uncapped = [key for key in of_kind["step_key"] if key not in recorded]
    with st.expander(f"Caps per {kind} (s)", expanded=True):
        columns = st.columns(3)
        for index, key in enumerate(capped):
            with columns[index % 3]:
                value = cap_slider(key, recorded[key] / 1000, recorded[key] / 1000)
            if abs(value - recorded[key] / 1000) > 1e-9:
                cap_overrides[key] = round(value * 1000)
        if uncapped:
            ss[added_key(kind)] = [k for k in ss.get(added_key(kind), []) if k in uncapped]
            given = st.multiselect(
                f"Give a cap to a {kind} step recorded without one (no budget.cap_ms)",
                uncapped, key=added_key(kind), format_func=str,
                help="Its slider starts at the 95th percentile of its recorded calls.")
            columns = st.columns(3)
            for index, key in enumerate(given):
                with columns[index % 3]:
                    p95 = float(caps_by_key.loc[key, "p95_ms"]) / 1000
                    cap_overrides[key] = round(cap_slider(key, p95, p95) * 1000)
if caps.empty:
    st.caption("No model, tool, queue or subagent calls in this range.")

deadline_ms = None if deadline_s is None else round(deadline_s * 1000)
policy = SimulationPolicy(cap_overrides, deadline_ms,
                          round(min_start_s * 1000) if min_start_s > 0 else None, retries)
# The address says the whole policy, as the sliders have it now: a link to this page is this
# scenario (Scenario.policy() of what it says is `policy`).
scenario = simulate_params.Scenario(tuple(sorted(cap_overrides.items())), deadline_ms,
                                    policy.min_start_ms, retries)
ss[_LAST] = simulate_params.to_params(scenario)
sidebar.write_url(ctx.state, ss[_LAST], owned=frozenset(simulate_params.KEYS))
with st.popover("Link to this scenario", icon=":material/link:",
                help="The address of this page with this policy and these filters, to paste "
                     "into a chat: it opens the same scenario"):
    st.code(links.page_url("simulate", {**ctx.state.query_params(), **ss[_LAST]}),
            language=None, wrap_lines=True)
result = data.simulation(ctx.filters, policy)
summary = result.summary.set_index("metric")
st.caption(fmt.escape_md(f"Policy: {policy.describe()}"))


def _pair(metric: str) -> tuple[object, object]:
    return summary.loc[metric, "actual"], summary.loc[metric, "predicted"]


def _change_metric(label: str, value: str, change: str | None, actual: str) -> Metric:
    """A rise is bad for every figure here (red); no change is `±0`, with no colour and no
    arrow."""
    unchanged = change is not None and float(change.split()[0].replace(",", "")) == 0
    return Metric(label, value, "±0" if unchanged else change, "inverse",
                  help=f"Actual: {actual}")


def _rate_metric(label: str, metric: str) -> Metric:
    actual, predicted = _pair(metric)
    delta = None
    if not (fmt.missing(actual) or fmt.missing(predicted)):
        delta = f"{(float(predicted) - float(actual)) * 100:+.1f} pp"
    return _change_metric(label, fmt.percent(predicted), delta, fmt.percent(actual))


def _count_metric(label: str, metric: str) -> Metric:
    actual, predicted = _pair(metric)
    return _change_metric(label, fmt.count(predicted), f"{int(predicted) - int(actual):+,}",
                          fmt.count(actual))


st.subheader("Predicted (change against actual)")
headline([_rate_metric("Exhaustion rate", "exhaustion_rate"),
          _rate_metric("Client timeout rate", "client_timeout_rate"),
          _rate_metric("Utilisation p99", "utilisation_p99"),
          _count_metric("Refused calls", "refused"),
          _count_metric("Writes timing out", "write_timeouts")], key="sim_headline")

fitted = result.tools.loc[result.tools["rests_on_fit"], "step_key"].tolist()
if fitted:
    st.caption(fmt.escape_md(
        "Rests on the latency model for " + ", ".join(fitted) + ": calls cut at a limit "
        "that the policy raises get a latency from a log-normal fitted per step (maximum "
        "likelihood on completed and cut calls, the cut ones right-censored); "
        f"{fmt.percent(summary.loc['exhaustion_rate', 'fit_share'])} of runs use such a draw."))
else:
    st.caption("Exact: no figure here rests on the latency model (every limit is at or "
               "below where the recorded calls were cut).")
beyond = int(summary.loc["runs_beyond_record", "predicted"])
if beyond:
    st.caption(f"{fmt.plural(beyond, 'run')} ended early in the record and get through it "
               "under this policy; what they would have done next is unknown, so they count as not "
               "exhausted (upper bound with them exhausted: "
               f"{fmt.percent(summary.loc['exhaustion_rate_upper', 'predicted'])}).")

st.plotly_chart(simulation_figures.timeout_rates(result.tools), key="sim_timeout_rates")
st.plotly_chart(simulation_figures.utilisation_cdf(result.runs), key="sim_utilisation")

st.subheader("Actual and predicted")
# Every figure in the one format of the page (3.5%, never 0.0347): rates as percentages,
# counts as counts; the table keeps the raw values underneath for sorting and copying.
rate_rows = result.summary["metric"].str.contains("rate|utilisation", regex=True)
summary_shown = result.summary.assign(figure=result.summary["metric"].map(
    lambda metric: FIGURES.get(metric, metric)))
tables.table(summary_shown.style
             .format(fmt.percent, subset=pd.IndexSlice[rate_rows, ["actual", "predicted"]])
             .format(fmt.count, subset=pd.IndexSlice[~rate_rows, ["actual", "predicted"]])
             .format(fmt.percent, subset=["fit_share"]),
             hide_index=True, key="sim_summary", height=tables.table_height(len(result.summary)),
             column_order=["figure", "actual", "predicted", "fit_share"],
             column_config={
                 "figure": st.column_config.TextColumn(
                     "figure", width=380, help="named as the page says it; the CSV and "
                     "`budgetscope simulate` name each as a metric (exhaustion_rate, "
                     "client_timeouts, …)"),
                 "fit_share": st.column_config.Column(
                     "rests on the fit", help="the share of runs whose figure uses a latency "
                     "drawn from the fitted model (fit_share)")})
st.subheader("Per step: the arithmetic")
st.caption("timeout rate p = timeouts / calls; calls / run n = calls / runs that call it; "
           "1 − (1 − p)ⁿ is the run timeout rate if calls were independent; run timeout rate "
           "= the replayed share of those runs with a timeout (calls in one run share a "
           "deadline and a slow upstream, so the two differ).")
tools_shown: pd.DataFrame = result.tools[TOOLS_SHOWN].assign(
    cap_ms=result.tools["cap_ms"].map(
        lambda v: "as recorded" if fmt.missing(v) else fmt.duration(v)),
    # as text: Streamlit shows a missing number as "None" whatever the Styler says
    **{column: result.tools[column].map(fmt.percent) for column in (
        "timeout_rate_actual", "timeout_rate", "run_timeout_rate")})
tables.table(tools_shown.style.format(fmt.percent, subset=["run_timeout_rate_formula"])
             .format(lambda v: fmt.NO_VALUE if fmt.missing(v) else f"{v:.2f}",
                     subset=["calls_per_run"]), hide_index=True, key="sim_tools",
             column_config=TOOLS_LABELS, column_order=TOOLS_FIRST,
             # every step at once: the table is read to the end, not scrolled in a box
             height=tables.table_height(len(tools_shown), most=80))
st.caption("Rates per step, recorded and under this policy. The calls and timeouts they divide, "
           "and the refused calls, are one click away:")
with st.expander("Calls, timeouts and refused calls behind each rate"):
    tables.table(tools_shown, key="sim_tools_counts", column_config=TOOLS_LABELS,
                 height=tables.table_height(len(tools_shown), most=80),
                 column_order=["step_key", "calls_actual", "timeouts_actual", "calls",
                               "timeouts", "refused_actual", "refused", "fit_calls"])
