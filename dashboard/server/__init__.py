"""The dashboard's server: how Streamlit is started for it, and what stands in front of it.

- bootstrap.py: Streamlit's `st.App` for dashboard/streamlit_app.py, run by `App.run` with the
  options the product needs, until SIGTERM or Ctrl-C; the commands hand it a `DashboardServer`
  (where, and who may open it) and a `DashboardConfig` (what the pages read).
- access.py: the guard every request passes (Host, Origin, token), as `st.App` middleware.
- connections.py: the port's own accept loop and the guard every connection passes (a request
  head in time, a cap on open connections), below the requests access.py sees.
- page_head.py: a page's HTML tells the browser to fetch the chart and table code at once,
  not when the first chart arrives (st.App middleware inside the guard).
- warm_up.py: what the first page view would otherwise pay for, done in the background at start.
- ground.py: the Streamlit series this is written for, and every Streamlit internal the
  dashboard still leans on, listed in one place (tests/dashboard/test_streamlit_ground.py
  checks each).

Nothing here imports Streamlit at import time: the CLI imports the commands for every command.
"""
