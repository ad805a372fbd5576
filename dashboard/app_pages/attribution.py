"""attribution (being written)."""

import streamlit as st

st.title("attribution")
