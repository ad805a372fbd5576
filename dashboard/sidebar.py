"""Streamlit pieces every page shares: the sidebar filters synced with the URL, what the
database holds, the empty state, errors as messages, and links to the run view.

Anything that came from a span goes through `fmt.escape_md` before Markdown, or into
st.dataframe / st.text / st.code, which never interpret it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import streamlit as st

from dashboard import config, data, fmt, run_search_params, simulate_params
from dashboard.filters import PRESETS, FilterState, from_params, now_utc
from dashboard.page_list import PAGE_PATHS
from queries.filters import FilterError, Filters

RUN_PAGE = "app_pages/run.py"
COMPARE_PAGE = "app_pages/compare.py"
_ALL_AGENTS = ""  # the agent selectbox's "all agents" option
_LAST = "_filters_last_synced"
_FOLLOW = "follow_new_spans"  # the sidebar toggle
_DRAWN_FROM = "_drawn_from_source"  # data.source_token() when the page was last drawn
_LAST_PAGE = "_page_last_run"  # the page of the previous full run
_OPENING_LINK = "_filters_of_opening_link"  # what the link that opened the session said


@dataclass(frozen=True)
class PageContext:
    state: FilterState
    filters: Filters
    previous: Filters | None
    now: dt.datetime
    status: data.DatabaseStatus
    # This run is the first of its page since another page ran (a sidebar click, a click-through,
    # or the first visit): widgets whose values the page sets itself set them again, see
    # arrived_on_page.
    arrived: bool = False


def set_context(context: PageContext) -> None:
    st.session_state["_page_context"] = context


def context() -> PageContext:
    return st.session_state["_page_context"]


# ---- filters <-> URL ---------------------------------------------------------------------

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


# ---- what the database holds, and the empty state ----------------------------------------

def sidebar_status(status: data.DatabaseStatus) -> None:
    box = st.sidebar.container(border=True)
    box.caption("Database")
    box.text(status.path + ("  (served by this process)" if status.serving else ""))
    lines = [f"spans  {status.spans:,}", f"runs   {status.runs:,}"]
    if status.newest_run_start:
        lines.append(f"newest run started\n  {status.newest_run_start[:19].replace('T', ' ')} UTC")
    if status.newest_received is not None:
        lines.append("newest span received\n  "
                     + status.newest_received.strftime("%Y-%m-%d %H:%M:%S UTC"))
    box.text("\n".join(lines))
    if status.traces_failed_derivation:
        box.warning(f"{status.traces_failed_derivation:,} trace(s) could not be derived: their "
                    "spans are stored, but their runs and steps stay as last derived (or are "
                    "missing). New spans of a trace retry it; the errors are in the log.")
    seconds = config.current().refresh_seconds
    if seconds:
        box.toggle("Follow new spans", value=True, key=_FOLLOW,
                   help=f"Checks the database every {seconds:g} s and redraws the page when "
                        "spans arrived or were derived (reading nothing when they did not).")
    box.button("Reload data", key="reload", on_click=data.clear_cache, icon=":material/refresh:",
               help="Forget every cached result and query the database again.")


def follow_new_data() -> None:
    """Redraw the whole page when the database changes after this point of the run.

    Called before the page reads anything, so that a change during the reads (or a read that
    failed because `budgetscope ingest` held the file) brings another redraw. A fragment on a
    timer only stats the database file and its WAL (data.source_token, no query), so an idle
    dashboard costs nothing; the page's queries rerun only when that token moved."""
    seconds = config.current().refresh_seconds
    if not seconds or not st.session_state.get(_FOLLOW, True):
        return
    st.session_state[_DRAWN_FROM] = data.source_token()

    @st.fragment(run_every=seconds)
    def watch() -> None:
        if data.source_token() != st.session_state.get(_DRAWN_FROM):
            st.rerun(scope="app")

    watch()


# Widget keys whose values pages read from the session state rather than from the widget's
# return value (the sidebar's filters, the Runs page's search). Streamlit drops the state of
# every widget a run did not draw, and a run that stops early (the file held by a writer, an
# error) draws few: the next run then found no "rs_culprit". Each run first writes them back,
# which keeps them (Streamlit's own advice for state that outlives a page).
KEPT_WIDGET_PREFIXES = ("f_", "rs_")
# How often a page that could not open the file checks whether it can again.
HELD_RETRY_SECONDS = 2.0


def keep_widget_state() -> None:
    """Keep the values of the widgets of KEPT_WIDGET_PREFIXES through a run that does not draw
    them; called first in every run, before any widget."""
    ss = st.session_state
    for key in list(ss.keys()):
        if isinstance(key, str) and key.startswith(KEPT_WIDGET_PREFIXES):
            ss[key] = ss[key]


def say_held(where: Any) -> bool:
    """When this run could not open the file (data.held): say so in `where`, above the page,
    and redraw the page by itself as soon as the file can be read again. True when said."""
    held = data.held()
    if held is None:
        return False
    shown = ("" if held.shown_from is None else " Showing results read at "
             + held.shown_from.strftime("%H:%M:%S UTC") + ".")
    where.info(fmt.escape_md(f"The database file is busy: {held.reason}{shown} This page "
                             "redraws by itself once the file can be read again."),
               icon=":material/hourglass_top:")
    with where:
        redraw_when_readable()
    return True


def redraw_when_readable() -> None:
    """A timer that redraws the page once the file can be opened again: whatever
    --refresh-seconds and "Follow new spans" say, a page that could not read recovers."""
    @st.fragment(run_every=HELD_RETRY_SECONDS)
    def wait_for_the_file() -> None:
        if data.file_readable():
            st.rerun(scope="app")

    wait_for_the_file()


def _endpoints() -> tuple[str, str]:
    """Where to send OTLP: the serving command's own endpoints, else the default ports."""
    return config.current().endpoints


# Shown to people as code: every line short enough to need no lint exception.
SDK_SNIPPET = """\
# pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "my-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint="{http}")))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("my-agent")
with tracer.start_as_current_span("run", attributes={"budget.total_ms": 30000}):
    ...  # the agent's run: model and tool calls as child spans
"""


def empty_state(path: str, serving: bool) -> None:
    """An empty (or absent) database: how to send data, instead of empty charts."""
    http, grpc = _endpoints()
    st.header("No agent runs here yet")
    st.markdown("This database holds no runs. Send traces of your agents' runs over OTLP, or "
                "load trace files:")
    st.code(path, language=None)  # a code block shows the path as it is, never escaped
    if serving:
        st.markdown("This server is receiving OTLP now:")
    else:
        st.markdown("Start the receiver, which owns the database and serves this dashboard:")
        st.code(f"budgetscope --db {path} serve", language="bash")
    st.code(f"OTLP/HTTP  {http}\nOTLP/gRPC  {grpc}", language=None)
    st.markdown("From Python with the OpenTelemetry SDK (the run span carries "
                "`budget.total_ms`; steps carry `budget.step.kind`, or are recognised from the "
                "usual instrumentations, docs/conventions.md), or with budgetscope-sdk "
                "(sdk/README.md):")
    st.code(SDK_SNIPPET.replace("{http}", http), language="python", wrap_lines=True)
    st.markdown("Or load files (OTLP JSON, JSON lines, protobuf, gzipped or not), or try the "
                "bundled sample:")
    st.code(f"budgetscope --db {path} ingest traces/\nbudgetscope demo", language="bash")


def show_error(error: BaseException, doing: str = "") -> None:
    """A failure as a message a person can act on, never a traceback."""
    if isinstance(error, data.DatabaseBusy):
        st.error(fmt.escape_md(str(error)))
        return
    prefix = f"Could not {doing}: " if doing else ""
    st.error(fmt.escape_md(f"{prefix}{type(error).__name__}: {error}"))


def no_runs_in_range(ctx: PageContext) -> bool:
    """Say so when the filters match no run; True when the page should stop."""
    runs = data.report("runs", ctx.filters)
    if not runs.empty:
        return False
    st.info(fmt.escape_md(f"No runs started in {ctx.state.label(ctx.now)}. The database "
                          f"holds {fmt.plural(ctx.status.runs, 'run')} in all: widen the "
                          "time range or pick another agent."))

    def show_all() -> None:  # a callback: widget state may change only before the widgets run
        st.session_state["f_range"] = "all"
        st.session_state["f_agent"] = _ALL_AGENTS

    st.button("Show all time, all agents", on_click=show_all, key="show_all")
    return True


# ---- links -------------------------------------------------------------------------------

def run_params(run_id: str, state: FilterState) -> dict[str, str]:
    return {**state.query_params(), "run": run_id}


def table(data: Any, **options: Any) -> Any:
    """st.dataframe as every page shows a table: without the index, and a missing value as the
    one no-value mark (Streamlit shows "None" for it, whatever a Styler says)."""
    options.setdefault("hide_index", True)
    options.setdefault("placeholder", fmt.NO_VALUE)
    options["column_config"] = _text_widths(data, options.get("column_config") or {},
                                            options.get("column_order"))
    return st.dataframe(data, **options)


# Source Sans at the grid's 14 px: about 7 px a character (hex ids are wide), plus padding.
_PX_PER_CHAR, _PADDING, _WIDEST = 7.0, 20, 300
_MEASURED_ROWS = 10  # about the rows the grid measures before the page is drawn


def _text_widths(data: Any, config: dict[str, Any], order: Any) -> dict[str, Any]:
    """A width for each text column from its longest value over every row: the grid sizes a
    column by its first rows only, so a longer value further down ("queue:handoff_queue" under
    "model:gpt-4o") was cut with an ellipsis. A width the page set wins."""
    frame = getattr(data, "data", data)  # a Styler's frame
    if not hasattr(frame, "columns") or frame.empty:
        return config
    out = dict(config)
    for column in (list(order) if order else list(frame.columns)):
        if column not in frame.columns or str(frame[column].dtype) not in ("object", "str",
                                                                         "string"):
            continue
        given = out.get(column)
        if isinstance(given, dict) and given.get("width") is not None:
            continue
        label = given.get("label") if isinstance(given, dict) else given
        lengths = frame[column].map(lambda v: len(str(v)) if v is not None else 1)
        longest = int(lengths.max())
        # Only where a value beyond the first rows is longer than those the grid measures:
        # elsewhere its own measure (of the real font) is the better one.
        if longest <= max(len(str(label or column)), int(lengths.head(_MEASURED_ROWS).max())):
            continue
        width = min(_WIDEST, round(longest * _PX_PER_CHAR + _PADDING))
        out[column] = ({**given, "width": width} if isinstance(given, dict)
                       else st.column_config.Column(label, width=width))
    return out


def table_height(rows: int, most: int = 30) -> int:
    """Pixels for a table of `rows` rows: all of them up to `most`, then it scrolls (Streamlit's
    default boxes every table to ten rows, above an empty page)."""
    return 38 + 35 * max(1, min(rows, most))


def run_link(run_id: str, state: FilterState, label: str = "Open run view") -> None:
    """A real link (an <a> with the run in its URL), so it also opens in a new tab."""
    st.page_link(RUN_PAGE, label=label, icon=":material/search:",
                 query_params=run_params(run_id, state))


def page_url(page: str, params: dict[str, str | list[str]]) -> str:
    """The absolute address of `page` (its path: `run`, `simulate`) with `params`, to paste
    into a chat: on the host and base path this page was opened at."""
    from urllib.parse import urlencode, urlsplit

    base = ""
    try:
        here = urlsplit(st.context.url or "")
    except Exception:  # noqa: BLE001 - no URL outside a browser session (AppTest)
        here = None
    if here is not None and here.scheme and here.netloc:
        parts = here.path.rstrip("/").split("/")
        if parts and parts[-1] in PAGE_PATHS:
            parts = parts[:-1]  # the app may live under a base path: keep it
        base = f"{here.scheme}://{here.netloc}{'/'.join(parts)}"
    # ':' and '/' as they are (step keys, run ids below a root): valid in a query, readable
    return f"{base}/{page}?{urlencode(params, doseq=True, safe=':/=')}"


def run_url(run_id: str, state: FilterState) -> str:
    """The absolute link to this run's view, to paste into a chat."""
    return page_url("run", run_params(run_id, state))
