"""reconciliation (being written)."""

import streamlit as st

st.title("reconciliation")
