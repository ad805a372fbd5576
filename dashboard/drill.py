"""Charts that open the runs behind what was clicked: a bar or a cell selected on a chart goes
to the Runs page with the matching search in its URL (dashboard/run_search_params.py), the page's
filters kept. Each figure carries what identifies its marks in `customdata` (figures.py), since
the labels shown are escaped text, not the keys."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from dashboard import page_context

RUNS_PAGE = "app_pages/runs.py"
Point = Mapping[str, Any]


_TARGET = "_drill_target"


def chart(figure: go.Figure, key: str,
          search_of: Callable[[Point], dict[str, str] | None]) -> None:
    """Draw `figure`; a selected point whose search_of(point) is a search opens the Runs page.

    Through a callback, so that a selection opens the runs once: the chart keeps its selection
    in session state, and coming back to this page must not open them again."""

    def chosen() -> None:
        for point in st.session_state[key].selection.points:
            search = search_of(point)
            if search:
                st.session_state[_TARGET] = search
                return

    st.plotly_chart(figure, key=key, on_select=chosen, selection_mode="points")
    search = st.session_state.pop(_TARGET, None)
    if search:
        state = page_context.current().state
        st.switch_page(RUNS_PAGE, query_params={**state.query_params(), **search})


def _data(point: Point) -> list[Any]:
    data = point.get("customdata")
    return list(data) if isinstance(data, list | tuple) else [data]


def culprit_runs(point: Point) -> dict[str, str] | None:
    """A bar of figures.culprits: the exhausted runs whose culprit is that step key."""
    data = _data(point)
    return {"exhausted": "yes", "culprit": str(data[2])} if len(data) > 2 else None


def holder_culprit_runs(point: Point) -> dict[str, str] | None:
    """A cell of figures.holder_culprit_matrix: exhausted runs with that holder and culprit
    (the grouped "(other)" row and column name no one key, so they open nothing)."""
    data = _data(point)
    holder, _, culprit = str(data[0] if data else "").partition("\x1f")
    if not culprit or "(other)" in (holder, culprit):
        return None
    return {"exhausted": "yes", "holder": holder, "culprit": culprit}


def failing_runs(point: Point) -> dict[str, str] | None:
    """A bar of figures.failures_by_step: runs holding a step of that key and class."""
    data = _data(point)
    return {"step": str(data[0]), "class": str(data[1])} if len(data) > 1 else None


def utilisation_runs(point: Point) -> dict[str, str] | None:
    """A bar of figures.utilisation_distribution: that agent's runs in that utilisation bin."""
    data = _data(point)
    if len(data) < 3:
        return None
    search = {"umin": f"{float(data[1]) * 100:g}", "umax": f"{float(data[2]) * 100:g}"}
    return {**search, "agent": str(data[0])} if data[0] else search


def budget_exhausted_runs(dimension: str) -> Callable[[Point], dict[str, str] | None]:
    """A bar of cost_figures.budget_shares: the runs that exhausted their dollar (`usd`) or
    token budget holding a step of that key, the most expensive first."""
    flag, sort = (("usd_exhausted", "cost_usd") if dimension == "usd"
                  else ("tokens_exhausted", "tokens"))

    def search(point: Point) -> dict[str, str] | None:
        data = _data(point)
        if len(data) < 4:
            return None
        return {flag: "yes", "step": str(data[3]), "sort": sort, "order": "desc"}

    return search
