"""The sidebar's filters (time range and agent), kept in step with the browser's URL both ways:
a pasted link or the back button sets the widgets, the widgets write the URL, and the filters
carry over when the sidebar switches pages. Also the widget state that must outlive a run that
does not draw the widgets.

A problem read from the URL goes through `fmt.escape_md` before it is shown.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from dashboard import config, data, fmt, run_search_params, simulate_params
from dashboard.filters import PRESETS, FilterState, from_params, now_utc
from queries.filters import FilterError

_ALL_AGENTS = ""  # the agent selectbox's "all agents" option
_LAST = "_filters_last_synced"
_LAST_PAGE = "_page_last_run"  # the page of the previous full run
_OPENING_LINK = "_filters_of_opening_link"  # what the link that opened the session said


def note_opening_link() -> None:
    """Keep the filters of the link that opened the session, before the run sends anything.

    A sidebar click interrupts the run at its next message and clears the URL; when that run
    had not reached sidebar_filters, the link's filters would be lost."""
    ss = st.session_state
    if _LAST not in ss and _OPENING_LINK not in ss:
        state, _ = from_params(st.query_params.to_dict())
        if state is not None:
            ss[_OPENING_LINK] = state


def arrived_on_page(page: str) -> bool:
    """Whether this run is the first of `page` since another page ran, and note that it ran.

    On such a run every widget whose value the app sets sets it again, even to the value it
    already holds. Measured: when a sidebar click interrupted the run that had set the filters,
    the next page drew them right, but the timer runs of follow_new_data's watcher read the
    selectboxes back at their first options, and the redraw the watcher asked for showed "Last
    24 hours" and all agents. Setting the values in the run that draws the widgets keeps them
    (tests/browser, test_new_spans_after_a_quick_page_switch_keep_the_filters).
    """
    ss = st.session_state
    arrived = ss.get(_LAST_PAGE) != page
    ss[_LAST_PAGE] = page
    return arrived


def _push_to_widgets(state: FilterState) -> None:
    ss = st.session_state
    ss["f_range"] = state.preset
    ss["f_agent"] = state.agent or _ALL_AGENTS
    ss["f_since_exact"] = state.since
    ss["f_until_exact"] = state.until
    for key, value in (("f_since", state.since), ("f_until", state.until)):
        ss[key] = (dt.datetime.fromisoformat(value.replace("Z", "+00:00")).date()
                   if value else None)


def _from_widgets() -> FilterState:
    ss = st.session_state
    preset = ss.get("f_range", "7d")
    agent = ss.get("f_agent") or None
    if preset != "custom":
        return FilterState(preset, None, None, agent)
    bounds: list[str | None] = []
    for key in ("since", "until"):
        picked = ss.get(f"f_{key}")
        exact = ss.get(f"f_{key}_exact")
        # A datetime from a link is kept while the widget still shows its date.
        if exact and picked == dt.datetime.fromisoformat(exact.replace("Z", "+00:00")).date():
            bounds.append(exact)
        else:
            bounds.append(picked.isoformat() if isinstance(picked, dt.date) else None)
    since, until = bounds
    return FilterState(preset, since, until, agent)


def default_preset(status: data.DatabaseStatus, now: dt.datetime, page: str = "") -> str:
    """Last 7 days when the data reaches into them, else all time: a link without filters (the
    demo's, a first visit) opens on data, not on an empty week. The weekly report opens on the
    last 4 full weeks instead, so that no row of it is a week cut short."""
    if status.newest_run_start:
        newest = dt.datetime.fromisoformat(status.newest_run_start.replace("Z", "+00:00"))
        if page == "weekly":
            first = FilterState("4w").window(now)[0]
            return "4w" if first is not None and newest >= first else "all"
        if newest >= now - dt.timedelta(days=7):
            return "7d"
    return "all"


def opening_filters(status: data.DatabaseStatus, now: dt.datetime,
                    page: str = "") -> FilterState:
    """What an address without filters opens on: the range the serving command chose (the
    demo: the sample's own weeks, which "Last 7 days" cuts to a few runs), else
    default_preset's."""
    opening = config.current().opening
    return opening if opening is not None else FilterState(default_preset(status, now, page))


def sidebar_filters(agents: tuple[str, ...], default: str | FilterState = "7d",
                    arrived: bool = False) -> FilterState:
    """Render the filters in the sidebar; URL in, URL out. `arrived`: this run is the first of
    its page (arrived_on_page), so the widgets are set again whatever they hold."""
    ss = st.session_state
    url_state, problems = from_params(st.query_params.to_dict())
    # The widgets must be set this run: the page's first, or their state is gone (Streamlit
    # drops it when a page switch interrupts a run, e.g. a chart's click through to Runs).
    must_set = arrived or "f_range" not in ss
    if url_state is not None and (url_state != ss.get(_LAST) or must_set):
        # A pasted link or the back button: the URL wins, and so it does whenever the widgets
        # must be set and the URL says the filters.
        _push_to_widgets(url_state)
    elif must_set:
        # The sidebar switched pages, which clears the URL, or the widgets' state is gone: the
        # filters carry over. Without a run that got this far, the opening link's filters do.
        _push_to_widgets(ss.get(_LAST) or ss.get(_OPENING_LINK) or (
            default if isinstance(default, FilterState) else FilterState(default)))
    for problem in problems:
        st.sidebar.warning(fmt.escape_md(problem))

    sidebar = st.sidebar
    sidebar.selectbox("Time range", list(PRESETS), key="f_range",
                      format_func=lambda token: PRESETS[token][0])
    if ss["f_range"] == "custom":
        sidebar.date_input("From (UTC)", key="f_since", format="YYYY-MM-DD")
        sidebar.date_input("Before (UTC)", key="f_until", format="YYYY-MM-DD",
                         help="Exclusive, like `budgetscope report --until`.")
    options = [_ALL_AGENTS, *agents]
    if ss.get("f_agent") and ss["f_agent"] not in options:
        options.append(ss["f_agent"])  # an agent named by a link but absent from the data
    sidebar.selectbox("Agent", options, key="f_agent",
                      format_func=lambda agent: agent or "All agents")
    state = _from_widgets()
    try:
        state.window(now_utc())
    except FilterError as error:
        st.sidebar.warning(fmt.escape_md(str(error)))
        state = FilterState(state.preset if state.preset != "custom" else "7d", agent=state.agent)
    write_url(state)
    ss[_LAST] = state
    return state


# The Cost page's choice: the budget its distribution and attribution are of (usd, tokens).
COST_KEYS = ("dimension",)
# Query parameters a page sets itself (the run view's run, the Runs page's search, What if's
# policy): the sidebar's filters leave them alone; the page that owns them writes them whole.
PAGE_OWNED_KEYS = frozenset({"run", "with", *simulate_params.KEYS, *run_search_params.KEYS,
                             *COST_KEYS})


def write_url(state: FilterState, extra: dict[str, str | list[str]] | None = None,
              owned: frozenset[str] = frozenset()) -> None:
    """Make the browser's URL say exactly these filters (plus `extra`, e.g. run=...; a list
    for a repeated key, What if's cap=). Keys of PAGE_OWNED_KEYS are kept unless they are in
    `owned`, the keys the caller manages."""
    wanted = {**state.query_params(), **(extra or {})}
    for key in list(st.query_params.keys()):
        if key not in wanted and (key not in PAGE_OWNED_KEYS or key in owned):
            del st.query_params[key]
    for key, value in wanted.items():
        values = list(value) if isinstance(value, list) else [value]
        if st.query_params.get_all(key) != values:
            st.query_params[key] = value


# Widget keys whose values pages read from the session state rather than from the widget's
# return value (the sidebar's filters, the Runs page's search). Streamlit drops the state of
# every widget a run did not draw, and a run that stops early (the file held by a writer, an
# error) draws few: the next run then found no "rs_culprit". Each run first writes them back,
# which keeps them (Streamlit's own advice for state that outlives a page).
KEPT_WIDGET_PREFIXES = ("f_", "rs_")


def keep_widget_state() -> None:
    """Keep the values of the widgets of KEPT_WIDGET_PREFIXES through a run that does not draw
    them; called first in every run, before any widget."""
    ss = st.session_state
    for key in list(ss.keys()):
        if isinstance(key, str) and key.startswith(KEPT_WIDGET_PREFIXES):
            ss[key] = ss[key]


def show_everything() -> None:
    """Widen the filters to all time and all agents. A button's callback: widget state may
    change only before the widgets run."""
    st.session_state["f_range"] = "all"
    st.session_state["f_agent"] = _ALL_AGENTS
