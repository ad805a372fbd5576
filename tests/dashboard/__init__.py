"""The dashboard's tests (dashboard/, without a browser): every page under Streamlit's AppTest,
the figures, tables and formatting, and its server (dashboard/server/: the token, Host and
Origin checks, the page head, Streamlit's ground, the wrong-port answer) as a real process.
What needs Chromium is in tests/browser/."""
