"""weekly (being written)."""

import streamlit as st

st.title("weekly")
