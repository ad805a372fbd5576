"""Links between the dashboard's pages: the run view and the comparison as page targets, the
run view's query parameters, a link that opens a run, and absolute addresses to paste into a
chat."""

from __future__ import annotations

import streamlit as st

from dashboard.filters import FilterState
from dashboard.page_list import PAGE_PATHS

RUN_PAGE = "app_pages/run.py"
COMPARE_PAGE = "app_pages/compare.py"


def run_params(run_id: str, state: FilterState) -> dict[str, str]:
    return {**state.query_params(), "run": run_id}


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
