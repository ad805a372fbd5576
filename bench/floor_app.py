"""The least a Streamlit page with Plotly charts can be: a title and `?n=` eight-bar charts.
bench_browser_floor.py times it to show what any dashboard page on this stack starts from."""

import plotly.graph_objects as go
import streamlit as st

st.set_page_config(layout="wide")
st.title("floor")
for index in range(int(st.query_params.get("n", "1"))):
    st.plotly_chart(go.Figure(go.Bar(x=list("abcdefgh"), y=list(range(8)))), key=f"c{index}")
