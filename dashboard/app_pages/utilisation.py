"""utilisation (being written)."""

import streamlit as st

st.title("utilisation")
