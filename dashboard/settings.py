"""Settings the commands hand to the dashboard process through its environment. Kept apart from
dashboard.data so that the CLI can name them without importing Streamlit."""

from __future__ import annotations

import os

# How often an open page checks for new data (`--refresh-seconds`; 0: never). Ten seconds: a
# check only stats the database file, and a chart that moves every second helps nobody read it.
REFRESH_ENV = "BUDGETSCOPE_REFRESH_SECONDS"
DEFAULT_REFRESH_SECONDS = 10.0


def refresh_seconds() -> float:
    """Seconds between an open page's checks for new data; 0 turns following off."""
    raw = os.environ.get(REFRESH_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_REFRESH_SECONDS
    except ValueError:
        return DEFAULT_REFRESH_SECONDS
