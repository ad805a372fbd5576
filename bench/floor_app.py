"""The least a Streamlit page with Plotly charts can be: a title and `?n=` eight-bar charts.
bench_dashboard.py (FloorApp) times it beside each page, to show what any dashboard page on this
stack starts from.

With `?furnish=1` the same charts come with the elements a dashboard page carries (Attribution's
count of each: a sidebar of page links, two selectboxes, two date inputs, a toggle and a button;
four metrics, captions, subheaders, a selectbox, two 30-row tables, a download button and a page
link), filled with constant data: what drawing those elements costs on this stack, with no query
and no figure of budgetscope's behind them. With `?furnish=simulate`, What if's own elements
instead, in the same sidebar: it carries many more (two toggles, thirteen sliders, five metrics,
three tables of 16-18 rows, one of them in a collapsed expander), as counted on the 35,000-run
database.
"""

import datetime

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

CHARTS = int(st.query_params.get("n", "1"))
FURNISH = st.query_params.get("furnish")
FURNISHED = FURNISH in ("1", "simulate")
TABLE = pd.DataFrame({"step key": [f"tool:lookup_{i:02d}" for i in range(30)],
                      "runs": range(30), "share": [i / 30 for i in range(30)],
                      "p50 ms": [1000.0 + i for i in range(30)],
                      "p95 ms": [2000.0 + i for i in range(30)],
                      "class": ["client_timeout"] * 30})


def charts() -> None:
    for index in range(CHARTS):
        st.plotly_chart(go.Figure(go.Bar(x=list("abcdefgh"), y=list(range(8)))),
                        key=f"c{index}")


def furnished_page() -> None:
    st.title("floor")
    st.caption("Runs started in 2026-11-23 → 2026-11-30 (UTC), all agents.")
    metrics = [("Runs", "7,517"), ("Exhausted", "4.1%"), ("Top culprit", "model:gpt-4o"),
               ("Its share", "38.2%")]
    for column, (label, value) in zip(st.columns(len(metrics)), metrics, strict=True):
        column.metric(label, value, "+0.4 pp")
    st.subheader("Who spent the budget")
    charts()
    st.caption("Share of the budget each step key spent in exhausted runs.")
    st.subheader("Step keys")
    st.selectbox("Order by", ["share", "runs", "p95"], key="order")
    st.dataframe(TABLE, hide_index=True)
    st.caption("Runs behind each share.")
    st.dataframe(TABLE.head(10), hide_index=True)
    st.download_button("Download CSV", TABLE.to_csv(index=False), "floor.csv")
    st.page_link(OTHER_PAGES[0], label="Open these runs")


def simulate_page() -> None:
    """What if's elements, in its order, with constant data."""
    st.title("floor")
    st.caption("2026-11-23 → 2026-11-30 · all agents · the stored runs replayed under the "
               "policy below, beside what actually happened.")
    st.subheader("Policy")
    left, middle, right = st.columns(3)
    with left:
        st.toggle("Set one run deadline", value=False, key="deadline_on")
        st.caption("Run deadline: as recorded (each run's own budget; the most common is 60 s).")
    with middle:
        st.slider("Refuse a call below this budget left (s)", 0.0, 10.0, 0.0, 0.25, key="min")
    with right:
        st.toggle("Retry calls that time out at their cap", value=True, key="retries")
    with st.expander("Caps per tool (s)", expanded=True):
        columns = st.columns(3)
        for index in range(11):
            with columns[index % 3]:
                st.slider(f"tool:lookup\\_{index:02d}", 0.1, 30.0, 2.0 + index, 0.1,
                          key=f"cap{index}")
        st.caption("No cap recorded (no budget.cap_ms), so no slider: queue:handoff_queue")
    st.caption("Policy: every recorded cap, deadline and refusal.")
    st.subheader("Predicted (change against actual)")
    for column, label in zip(st.columns(5), ("Exhaustion rate", "Client timeout rate",
                                             "Utilisation p99", "Refused calls",
                                             "Writes timing out"), strict=True):
        column.metric(label, "4.1%", "±0", delta_color="off", help="Actual: 4.1%")
    st.caption("Exact: no figure here rests on the latency model.")
    charts()
    st.subheader("Actual and predicted")
    st.dataframe(TABLE.head(16), hide_index=True)
    st.subheader("Per step: the arithmetic")
    st.caption("timeout rate p = timeouts / calls; calls / run n = calls / runs that call it.")
    st.dataframe(TABLE.head(18), hide_index=True)
    st.caption("The calls and timeouts they divide are one click away:")
    with st.expander("Calls, timeouts and refused calls behind each rate"):
        st.dataframe(TABLE.head(18), hide_index=True)


def other_page() -> None:
    st.title("other")


if FURNISHED:
    OTHER_PAGES = [st.Page(other_page, title=f"Page {index}", url_path=f"page{index}")
                   for index in range(10)]
    page = simulate_page if FURNISH == "simulate" else furnished_page
    navigation = st.navigation([st.Page(page, title="Overview", default=True), *OTHER_PAGES])
    st.set_page_config(layout="wide")
    sidebar = st.sidebar
    sidebar.selectbox("Time range", ["Last 7 days", "Last 24 hours", "Custom (UTC)"], index=2)
    sidebar.date_input("From (UTC)", datetime.date(2026, 11, 23))
    sidebar.date_input("Before (UTC)", datetime.date(2026, 11, 30))
    sidebar.selectbox("Agent", ["All agents", "support-agent", "research-agent"])
    sidebar.caption("budgetscope.duckdb · 1,002,397 spans")
    sidebar.toggle("Follow new spans", value=True)
    sidebar.button("Reload data")
    navigation.run()
else:
    st.set_page_config(layout="wide")
    st.title("floor")
    charts()
