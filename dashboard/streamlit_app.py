"""budgetscope dashboard: navigation, the shared sidebar (filters in the URL, what the database
holds) and the empty state. Each page is a file in app_pages/ and holds UI only; numbers come
from `queries` through dashboard/data.py.

Run standalone with `budgetscope dashboard` (or `streamlit run dashboard/streamlit_app.py` with
BUDGETSCOPE_DB set); inside `budgetscope serve` it reads through the server's database owner.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, layout
from dashboard.filters import now_utc

st.set_page_config(page_title="budgetscope", page_icon="⏱️", layout="wide")

PAGES = {
    "overview": st.Page("app_pages/overview.py", title="Overview", icon="📊",
                        url_path="overview", default=True),
    "attribution": st.Page("app_pages/attribution.py", title="Attribution", icon="🧭",
                           url_path="attribution"),
    "failures": st.Page("app_pages/failures.py", title="Failures", icon="⚡",
                        url_path="failures"),
    "utilisation": st.Page("app_pages/utilisation.py", title="Utilisation", icon="⏳",
                           url_path="utilisation"),
    "reconciliation": st.Page("app_pages/reconciliation.py", title="Reconciliation",
                              icon="🔁", url_path="reconciliation"),
    "run": st.Page("app_pages/run.py", title="Run view", icon="🔎", url_path="run"),
    "weekly": st.Page("app_pages/weekly.py", title="Weekly report", icon="🗓️",
                      url_path="weekly"),
}


def main() -> None:
    page = st.navigation(list(PAGES.values()))
    # `/?run=<id>` (a link pasted from chat) opens the run view; Streamlit clears the query
    # string when the sidebar switches pages, so a `run` seen on another page came from a link.
    if "run" in st.query_params and page.url_path != "run":
        st.switch_page(PAGES["run"], query_params=st.query_params.to_dict())
    st.sidebar.title("⏱️ budgetscope")
    try:
        status = data.status()
    except data.NoDatabase as error:
        layout.empty_state(error.path, serving=False)
        return
    except Exception as error:  # noqa: BLE001 - a message, never a traceback
        layout.show_error(error, "read the database")
        return
    state = layout.sidebar_filters(status.agents)
    layout.sidebar_status(status)
    if status.empty:
        layout.empty_state(status.path, status.serving)
        return
    now = now_utc()
    try:
        filters, previous = state.filters(now), state.previous(now)
    except Exception as error:  # noqa: BLE001
        layout.show_error(error, "apply the filters")
        return
    layout.set_context(layout.PageContext(state, filters, previous, now, status))
    try:
        page.run()
    except Exception as error:  # noqa: BLE001 - any page failure is shown as a message
        # (st.rerun / st.switch_page / st.stop raise BaseExceptions, which pass through)
        layout.show_error(error, f"draw {page.title}")


main()
