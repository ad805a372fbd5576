"""failures (being written)."""

import streamlit as st

st.title("failures")
