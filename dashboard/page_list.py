"""The dashboard's pages, listed once: streamlit_app.py builds its navigation from this, and
links.py knows from it which last path segment of an address is a page (to find the app's base
path). Kept apart from both because streamlit_app runs the app when imported."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageEntry:
    name: str  # app_pages/<name>.py, and the address it answers at
    title: str
    icon: str  # a Material icon name
    # Whether the page draws Plotly charts: a page that draws none is not sent the chart code's
    # preload (dashboard/server/page_head.py).
    charts: bool = True


# In the sidebar's order; the first is the default page (served at `/`).
PAGES = (
    PageEntry("overview", "Overview", "dashboard"),
    PageEntry("attribution", "Attribution", "pie_chart"),
    PageEntry("cost", "Cost", "payments"),
    PageEntry("failures", "Failures", "error"),
    PageEntry("utilisation", "Utilisation", "speed"),
    PageEntry("reconciliation", "Reconciliation", "sync"),
    PageEntry("runs", "Runs", "list", charts=False),
    PageEntry("run", "Run view", "search"),
    PageEntry("compare", "Compare runs", "compare_arrows"),
    PageEntry("weekly", "Weekly report", "calendar_month", charts=False),
    PageEntry("simulate", "What if", "tune"),
    PageEntry("budgets", "Budgets", "hourglass_top", charts=False),
)
DEFAULT_PAGE = PAGES[0].name
# The addresses the pages answer at (`/overview` too: a hidden alias of the default page).
PAGE_PATHS = frozenset(page.name for page in PAGES)
PAGES_WITHOUT_CHARTS = frozenset(page.name for page in PAGES if not page.charts)
