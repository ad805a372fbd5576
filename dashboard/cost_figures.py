"""Pure Plotly builders for tokens and dollars (docs/metrics.md §11): the Cost page's budget
shares and weekly spend, and the run view's cumulative spend against the dollar budget.
DataFrame in, Figure out, as figures.py; colours from colors.py only (wine is the budget, drawn
as a line, never a series); any text that came from a span goes through fmt.plot_text.

A chart positions dollars as floats; every amount written on it (a tooltip, a label) is the
exact text fmt.usd gives, as the tables and the terminal write it.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard import colors, fmt
from dashboard.figures import _LAYOUT, _figure, labels
from queries.run_spend import RunSpend


def _float(value: object) -> float:
    return float(value) if isinstance(value, Decimal | int | float) and not fmt.missing(value) \
        else float("nan")


def budget_shares(attribution: pd.DataFrame, dimension: str = "usd", top: int = 15) -> go.Figure:
    """Budget share per step key over the runs that exhausted their dollar (or token) budget
    (the cost-attribution report), largest first; each bar carries the key for a click to list
    the exhausted runs holding such a step."""
    word = "dollar" if dimension == "usd" else "token"
    # the keys that spent: a key whose steps spent nothing has no bar to draw (the table
    # below the chart lists every key of the exhausted runs)
    rows = attribution[attribution["budget_share"] > 0].head(top).iloc[::-1]
    figure = _figure(f"Share of the {word} budget per step key ({word}-exhausted runs)",
                     xaxis=dict(title=f"share of those runs' {word} budget (not clipped)",
                                tickformat=".0%"),
                     height=max(260, 40 + 28 * len(rows)))
    figure.add_bar(y=labels(rows["step_key"]), x=rows["budget_share"], orientation="h",
                   marker_color=colors.NEUTRAL, name="budget share",
                   customdata=np.stack([rows["culprit_runs"], rows["crosser_runs"],
                                        rows["exhausted_runs"],
                                        rows["step_key"].astype(str)], axis=-1)
                   if len(rows) else None,
                   hovertemplate="%{y}: %{x:.1%} of the budget<br>cost culprit in "
                                 "%{customdata[0]} runs, crosser in %{customdata[1]}, held in "
                                 "%{customdata[2]}<extra></extra>")
    # the whole budget: a key past it spent more than the runs' budgets by itself. Its label
    # sits above the plot: inside, on the top bar's row, it was grey text on a key that spent
    # past 100 % (model:gpt-4o at 106.6 % on the sample).
    figure.add_vline(x=1.0, line=dict(color=colors.BUDGET, width=2))
    figure.add_annotation(x=1.0, xref="x", y=1.0, yref="paper", yanchor="bottom",
                          showarrow=False, text="budget")
    return figure


def weekly_spend(spend: pd.DataFrame) -> go.Figure:
    """Spend per ISO week, one panel per agent (cost_summaries.weekly_spend's rows): bars of
    the week's known cost, and the agent's weekly dollar budget as a wine line when one is
    declared. A week whose cost is a lower bound, or that the range cuts short, says so in its
    tooltip, and its bar is drawn lighter."""
    groups = list(spend.groupby("agent", dropna=False, sort=True))
    names = [fmt.plot_text(agent if not fmt.missing(agent) else "(no agent)")
             for agent, _ in groups]
    figure = make_subplots(rows=max(1, len(groups)), cols=1, shared_xaxes=True,
                           vertical_spacing=0.08 if len(groups) > 1 else 0.0,
                           subplot_titles=names or None)
    figure.update_layout(title=dict(text="Weekly spend per agent against its weekly budget"),
                         **_LAYOUT, height=max(320, 90 + 160 * len(groups)), showlegend=True)
    budgets: list[dict[str, object]] = []
    for i, ((_, rows), name) in enumerate(zip(groups, names, strict=True), start=1):
        cost = [_float(v) for v in rows["cost_usd"]]
        incomplete = rows["incomplete_cost_runs"].fillna(0).astype(int).to_numpy()
        partial = rows["partial_week"].fillna(False).astype(bool).to_numpy()
        budget = rows["weekly_budget_usd"]
        notes = [
            f"{fmt.usd(v, at_least=bool(n))} spent by {int(r):,} runs"
            + (f" ({int(n):,} with a cost that is a lower bound)" if n else "")
            + (f"; {fmt.usd(b)} weekly budget, {fmt.percent(u)} of it"
               if not fmt.missing(b) else "; no weekly budget declared")
            + ("; a partial week" if p else "")
            for v, n, r, b, u, p in zip(rows["cost_usd"], incomplete, rows["runs"], budget,
                                        rows["weekly_budget_utilisation"], partial,
                                        strict=True)]
        figure.add_bar(x=rows["week"].astype(str), y=cost, name=name, row=i, col=1,
                       marker=dict(color=colors.SERIES[(i - 1) % len(colors.SERIES)],
                                   opacity=[0.5 if p else 1.0 for p in partial]),
                       customdata=notes,
                       hovertemplate=f"{name}, %{{x}}<br>%{{customdata}}<extra></extra>")
        known = [_float(b) for b in budget if not fmt.missing(b)]
        if known:
            suffix = "" if i == 1 else str(i)
            budgets.append(dict(type="line", xref=f"x{suffix} domain", x0=0, x1=1,
                                yref=f"y{suffix}", y0=known[-1], y1=known[-1],
                                line=dict(color=colors.BUDGET, width=2)))
        top = max([*(c for c in cost if np.isfinite(c)), *known, 0.0])
        figure.update_yaxes(title_text="spend", tickprefix="$", rangemode="tozero",
                            range=[0, top * 1.15 if top > 0 else 1], row=i, col=1)
    figure.update_layout(shapes=budgets)  # the wine lines: the page's caption names them
    figure.update_xaxes(type="category", row=max(1, len(groups)), col=1,
                        title_text="ISO week (UTC)")
    return figure


def cumulative_spend(spend: RunSpend, start_ns: int, steps: pd.DataFrame,
                     culprit_span: object = None) -> go.Figure:
    """The run's known cost as its calls completed (queries.run_spend: bill order), against its
    dollar budget (a wine line) with the call that reached it marked. Each call is a point in
    its step's name (`#3 model:gpt-4o`); a call with no price adds nothing known and is marked
    apart, so a lower bound shows where it is one. `steps`: the run view's steps (number,
    step_key, span_id), to name each call's top-level step."""
    calls = spend.calls
    names = {str(span): f"#{number} {key}" for span, number, key in zip(
        steps["span_id"], steps["number"], steps["step_key"], strict=True)} \
        if not steps.empty else {}
    ends = (calls["end_ns"].astype("int64") - start_ns) / 1e6
    horizon = float(ends.max()) if len(calls) else 1.0
    unit, div = fmt.duration_axis_unit(max(horizon, 1e-3))
    x = ends / div
    cumulative = calls["cumulative_nano"].to_numpy(dtype=float) / 1e9
    budget = spend.budget_nano
    figure = _figure("Cumulative spend against the dollar budget",
                     xaxis=dict(title=f"time since run start ({unit}): each call counts when "
                                      "it ends"),
                     yaxis=dict(title="known cost so far", tickprefix="$", rangemode="tozero"),
                     height=380)
    step_of = [names.get(str(s), "under no step") if not fmt.missing(s) else "under no step"
               for s in calls["top_step_id"]]
    words = [f"{fmt.plot_text(name)}{' (cost culprit)' if s == culprit_span else ''}<br>"
             f"{fmt.plot_text(model) if not fmt.missing(model) else 'no model named'}, "
             f"{fmt.count(tokens)} tokens<br>"
             + (f"{fmt.usd_nano(cost)} ({fmt.plot_text(source)}), {fmt.usd_nano(total)} so far"
                if not fmt.missing(cost) else
                f"no price: cost unknown, {fmt.usd_nano(total)} known so far")
             for name, s, model, tokens, cost, source, total in zip(
                 step_of, calls["top_step_id"], calls["model"], calls["tokens"],
                 calls["cost_nano"], calls["cost_source"], calls["cumulative_nano"],
                 strict=True)]
    # From nothing at the run's start, a step up at each call's end.
    figure.add_scatter(x=[0.0, *x], y=[0.0, *cumulative], mode="lines",
                       line=dict(color=colors.SPEND, width=2, shape="hv"),
                       name="known cost so far", hoverinfo="skip")
    priced = calls["cost_nano"].notna().to_numpy()
    for mask, name, marker in (
            (priced, "a call, at its end", dict(color=colors.SPEND, size=7)),
            (~priced, "a call with no price (cost unknown)",
             dict(color=colors.UNPRICED, size=11, symbol="x-thin-open", line=dict(width=2.5)))):
        if mask.any():
            figure.add_scatter(x=x[mask], y=cumulative[mask], mode="markers", name=name,
                               marker=marker, customdata=[w for w, m in zip(words, mask,
                                                                            strict=True) if m],
                               hovertemplate="+%{x:.3~f} " + unit + "<br>%{customdata}"
                                             "<extra></extra>")
    if budget is not None:
        # under the spend: a run just past its budget ($0.3003 of $0.30) ran along the line,
        # and drawn over it the spend vanished from the crossing to the next call
        figure.add_hline(y=budget / 1e9, line=dict(color=colors.BUDGET, width=2),
                         layer="below", annotation_text=f"dollar budget {fmt.usd_nano(budget)}",
                         annotation_position="top left")
    culprit = [i for i, s in enumerate(calls["top_step_id"])
               if not fmt.missing(culprit_span) and s == culprit_span
               and not fmt.missing(calls["cost_nano"].iloc[i])]
    if culprit:
        # its dearest call, named with what the whole step spent
        i = max(culprit, key=lambda j: int(calls["cost_nano"].iloc[j]))
        step_total = sum(int(calls["cost_nano"].iloc[j]) for j in culprit)
        figure.add_annotation(x=x.iloc[i], y=cumulative[i], showarrow=True, arrowhead=0,
                              ax=40, ay=40, xanchor="left",
                              text=f"cost culprit {fmt.plot_text(step_of[i])}: "
                                   f"{fmt.usd_nano(step_total)} in all")
    if spend.crossing is not None:
        i = spend.crossing
        before = int(calls["cumulative_nano"].iloc[i]) - int(calls["cost_nano"].iloc[i])
        text = (f"crossed by {fmt.plot_text(step_of[i])}: {fmt.usd_nano(before)} → "
                f"{fmt.usd_nano(int(calls['cumulative_nano'].iloc[i]))}")
        figure.add_scatter(x=[x.iloc[i]], y=[cumulative[i]], mode="markers",
                           name="the call that reached the budget (crosser)",
                           marker=dict(symbol="star", size=18, color=colors.CROSSING,
                                       line=dict(width=1, color=colors.CROSSING)),
                           customdata=[text], hovertemplate="%{customdata}<extra></extra>")
        figure.add_annotation(x=x.iloc[i], y=cumulative[i], text=text, showarrow=True,
                              arrowhead=0, ax=-40, ay=-36, xanchor="right")
    top = max([float(cumulative.max()) if len(cumulative) else 0.0,
               budget / 1e9 if budget is not None else 0.0])
    figure.update_yaxes(range=[0, top * 1.2 if top > 0 else 1])
    figure.update_xaxes(range=[0, max(float(x.max()) if len(x) else 1.0, 1e-6) * 1.03])
    return figure
