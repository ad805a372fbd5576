"""budgetscope dashboard: navigation, the shared sidebar (filters in the URL, what the database
holds) and the empty state. Each page is a file in app_pages/ and holds UI only; numbers come
from `queries` through dashboard/data.py.

Run standalone with `budgetscope dashboard` (or `streamlit run dashboard/streamlit_app.py` with
BUDGETSCOPE_DB set); inside `budgetscope serve` it reads through the server's database owner.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, database_status, notices, page_context, page_list, sidebar
from dashboard.favicon import favicon
from dashboard.filters import now_utc

sidebar.note_opening_link()  # first: any message sent lets a sidebar click interrupt the run
# Our own image, not a Material icon: that one is fetched from fonts.gstatic.com (favicon.py).
st.set_page_config(page_title="budgetscope", page_icon=favicon(), layout="wide")

def _page(name: str, title: str, icon: str, default: bool = False,
          url_path: str | None = None) -> st.Page:
    return st.Page(f"app_pages/{name}.py", title=title, icon=f":material/{icon}:",
                   url_path=url_path or name, default=default)


# The overview is served at `/`; Streamlit gives a default page no other address, so `/overview`
# (typed by hand, or written like every other page's link) is a hidden page that forwards there.
OVERVIEW_ALIAS = st.Page("app_pages/overview.py", title="Overview", url_path="overview",
                         visibility="hidden")
PAGES = {entry.name: _page(entry.name, entry.title, entry.icon,
                          default=entry.name == page_list.DEFAULT_PAGE,
                          url_path="home" if entry.name == page_list.DEFAULT_PAGE else None)
         for entry in page_list.PAGES}


def main() -> None:
    page = st.navigation([*PAGES.values(), OVERVIEW_ALIAS])
    if page.url_path == OVERVIEW_ALIAS.url_path:
        st.switch_page(PAGES["overview"], query_params=st.query_params.to_dict())
    # `/?run=<id>` (a link pasted from chat) opens the run view; Streamlit clears the query
    # string when the sidebar switches pages, so a `run` seen on another page came from a link.
    # The comparison view also takes `run` (with `with`): it stays where it is.
    if "run" in st.query_params and page.url_path not in ("run", "compare"):
        st.switch_page(PAGES["run"], query_params=st.query_params.to_dict())
    arrived = sidebar.arrived_on_page(page.url_path)
    sidebar.keep_widget_state()
    st.sidebar.title("budgetscope")
    database_status.follow_new_data()
    notice = st.container()  # above the page: a note when the file was held by a writer
    try:
        status = data.status()
    except data.NoDatabase as error:
        notices.empty_state(error.path, serving=False)
        return
    except Exception as error:  # noqa: BLE001 - a message, never a traceback
        notices.show_error(error, "read the database")
        if isinstance(error, data.DatabaseBusy):  # nothing read before to show instead
            database_status.redraw_when_readable()
        return
    # Said before the page runs when the status already found the file held (a page may end
    # with st.stop), and after it when only the page's own reads did.
    said = database_status.say_held(notice)
    state = sidebar.sidebar_filters(
        status.agents, sidebar.opening_filters(status, now_utc(), page.url_path), arrived)
    database_status.sidebar_status(status)
    if status.empty:
        notices.empty_state(status.path, status.serving)
        return
    now = now_utc()
    try:
        filters, previous = state.filters(now), state.previous(now)
    except Exception as error:  # noqa: BLE001
        notices.show_error(error, "apply the filters")
        return
    page_context.set_current(
        page_context.PageContext(state, filters, previous, now, status, arrived))
    try:
        page.run()
    except Exception as error:  # noqa: BLE001 - any page failure is shown as a message
        # (st.rerun / st.switch_page / st.stop raise BaseExceptions, which pass through)
        notices.show_error(error, f"draw {page.title}")
        if isinstance(error, data.DatabaseBusy):
            database_status.redraw_when_readable()
    finally:
        if not said:
            database_status.say_held(notice)


with data.one_open_per_run():
    main()
