"""Placeholder dashboard page: span and trace counts through the server's database owner.

The dashboard engineer replaces this file; it exists so that `budgetscope serve` has a page to
serve and to show that the dashboard reads through `current_owner()` in the same process.
"""

from __future__ import annotations

import streamlit as st

from ingest.owner import current_owner

st.set_page_config(page_title="budgetscope", layout="wide")
st.title("budgetscope")


@st.fragment(run_every=2)  # new spans show within seconds without a page reload
def counts() -> None:
    owner = current_owner()
    if owner is None:
        st.info("No database here: start `budgetscope serve`, which owns the database and "
                "serves this page.")
        return
    cursor = owner.cursor()
    try:
        spans, traces = cursor.execute(
            "SELECT count(*), count(DISTINCT trace_id) FROM spans").fetchone() or (0, 0)
    finally:
        cursor.close()
    left, right = st.columns(2)
    left.metric("spans", f"{spans:,}")
    right.metric("traces", f"{traces:,}")


counts()
