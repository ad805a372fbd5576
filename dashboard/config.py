"""What the dashboard is given: one `DashboardConfig`, from the command that starts it.

`budgetscope dashboard`, `demo` and `serve` build it and `configure` it before Streamlit runs
the app, which it does as a script in threads of the same process: the pages read `current()`.
Started any other way (`streamlit run dashboard/streamlit_app.py`, Streamlit's AppTest), the
app has no command in front of it and reads its configuration from the environment:
BUDGETSCOPE_DB (default budgetscope.duckdb) and BUDGETSCOPE_BACKEND, as the CLI reads them, and
BUDGETSCOPE_REFRESH_SECONDS (as `--refresh-seconds`).

Kept apart from dashboard.data so that the CLI can build it without importing Streamlit.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from dashboard.filters import FilterState
from store import BACKEND_ENV, DB_ENV, DEFAULT_DB, Source

# How often an open page checks for new data (`--refresh-seconds`; 0: never). Ten seconds: a
# check only stats the database file, and a chart that moves every second helps nobody read it.
DEFAULT_REFRESH_SECONDS = 10.0
REFRESH_ENV = "BUDGETSCOPE_REFRESH_SECONDS"
# Where the empty state tells senders to send, when no server announced its own endpoints.
DEFAULT_ENDPOINTS = ("http://127.0.0.1:4318/v1/traces", "127.0.0.1:4317")


@dataclass(frozen=True)
class DashboardConfig:
    """Where the data is, how often pages follow it, and what a page may change.

    `editor`: inside `budgetscope serve`, the server's declared-budget service (it writes
    through the server's single writer; store.DeclaredBudgets); None
    elsewhere, where the dashboard only reads and changes are made with `budgetscope budgets`.
    `prices`: likewise the server's price service (store.DeclaredPrices), for `budgetscope
    prices set/unset` from the Budgets page.
    `endpoints`: the OTLP/HTTP and OTLP/gRPC addresses the empty state names.
    `opening`: the filters an address without any opens on, when the command knows better
    than the usual default (the demo: its sample's own weeks); None for the usual default."""

    source: Source = field(default_factory=Source)
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    editor: Any = None
    prices: Any = None
    endpoints: tuple[str, str] = DEFAULT_ENDPOINTS
    opening: FilterState | None = None

    @classmethod
    def from_environment(cls) -> DashboardConfig:
        return cls(Source(db=os.environ.get(DB_ENV) or DEFAULT_DB,
                          backend=os.environ.get(BACKEND_ENV) or None),
                   refresh_seconds=_seconds(os.environ.get(REFRESH_ENV, "")))


def _seconds(raw: str) -> float:
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_REFRESH_SECONDS
    except ValueError:
        return DEFAULT_REFRESH_SECONDS


_configured: DashboardConfig | None = None
_lock = threading.Lock()


def configure(config: DashboardConfig | None) -> None:
    """Give the dashboard of this process its configuration (None: back to the environment)."""
    global _configured
    with _lock:
        _configured = config


def current() -> DashboardConfig:
    """The configuration the command gave, else the one the environment describes."""
    configured = _configured
    return configured if configured is not None else DashboardConfig.from_environment()
