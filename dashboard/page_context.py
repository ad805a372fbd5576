"""What the page being drawn is drawn against: the filters, the window before them, the time
they were resolved at and what the database holds. streamlit_app.py sets it once a run; every
page and chart reads it through `current()`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import streamlit as st

from dashboard import data
from dashboard.filters import FilterState
from queries.filters import Filters

_KEY = "_page_context"


@dataclass(frozen=True)
class PageContext:
    state: FilterState
    filters: Filters
    previous: Filters | None
    now: dt.datetime
    status: data.DatabaseStatus
    # This run is the first of its page since another page ran (a sidebar click, a click-through,
    # or the first visit): widgets whose values the page sets itself set them again, see
    # sidebar.arrived_on_page.
    arrived: bool = False


def set_current(context: PageContext) -> None:
    st.session_state[_KEY] = context


def current() -> PageContext:
    return st.session_state[_KEY]
