"""One colour per class, used by every chart, so that a colour means the same thing on every page.

Client give-ups (`client_timeout`, our deadline fired) and upstream failures (`upstream_error`,
their availability) are opposite problems (SPEC §3), so they get colours far apart on the wheel
(orange vs blue) and never share a bar. The palette is Okabe-Ito, which stays distinguishable
for the common colour-vision deficiencies.
"""

from __future__ import annotations

from store import vocabulary

# SPEC §3 step classes, in the order charts stack them: healthy first, then ours, then theirs.
STEP_CLASSES: tuple[str, ...] = vocabulary.CLASSES

CLASS_COLORS: dict[str, str] = {
    "ok": "#009E73",              # bluish green
    # amber: a client give-up (our configuration); a call cut at its cap is one, and is drawn
    # in it wherever calls are (the latency against the cap)
    "client_timeout": "#E69F00",
    "upstream_error": "#0072B2",  # blue: upstream failure (their availability)
    "refused": "#CC79A7",         # reddish purple: not started, budget too small
    "cancelled": "#999999",       # grey
    "client_error": "#8C564B",    # brown
    "error": "#D55E00",           # vermillion
}

CLASS_LABELS: dict[str, str] = {
    "ok": "ok",
    "client_timeout": "client give-up (client_timeout)",
    "upstream_error": "upstream failure (upstream_error)",
    "refused": "refused",
    "cancelled": "cancelled",
    "client_error": "client error",
    "error": "error",
}

# failures report column -> class
FAILURE_COLUMNS: dict[str, str] = {
    "ok": "ok",
    "client_timeouts": "client_timeout",
    "upstream_errors": "upstream_error",
    "refused": "refused",
    "cancelled": "cancelled",
    "client_errors": "client_error",
    "errors": "error",
}

# Everything below is not a class, so none of it may wear a class colour (a test checks): the
# agents, percentiles, outcomes and marks come from Paul Tol's muted palette and greys.
# Wine is the budget and the deadline only, on every chart (a test checks): it meant seven
# things, among them an agent whose bars hid the budget line drawn over them.
WINE = "#882255"
DEADLINE = WINE  # the run's deadline
BUDGET = WINE  # the budget: 100% utilisation, a step's allocation

OUTCOME_COLORS: dict[str, str] = {
    "completed": "#44AA99",  # teal
    "partial": "#DDCC77",    # sand
    "exhausted": "#CC6677",  # rose
    "failed": "#332288",     # indigo
    "cancelled": "#BBBBBB",
    "unknown": "#DDDDDD",
}

RECONCILE_COLORS: dict[str, str] = {
    "landed": "#44AA99",
    "not_landed": "#CC6677",  # rose: a bad result, as an exhausted run's
    "unknown": "#BBBBBB",
    "orphan": "#AA4499",
}

# Lines that mark something on a chart rather than a class.
RESERVE = "#AA4499"
REMAINING = "#88CCEE"
ALLOCATION = "#4D4D4D"      # the allocation a step got, beside the budget left (run view)
CAP = "#000000"
P95 = "#555555"
THRESHOLD = "#777777"
NEUTRAL = "#56B4E9"         # single-series bars that are not a class (runs, shares)
COMPARE = "#BBBBBB"         # the comparison series (completed runs, previous period)
# One per agent (or tool): indigo, cyan, olive, green, sand, teal, purple.
SERIES = ("#332288", "#88CCEE", "#999933", "#117733", "#DDCC77", "#44AA99", "#AA4499")
# Percentiles in greys, told apart by the dash as well.
PERCENTILE_COLORS = {"p50": "#888888", "p90": "#555555", "p99": "#222222"}


def class_color(name: str) -> str:
    return CLASS_COLORS.get(name, "#BBBBBB")
