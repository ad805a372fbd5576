"""One colour per class, used by every chart, so that a colour means the same thing on every page.

Client give-ups (`client_timeout`, our deadline fired) and upstream failures (`upstream_error`,
their availability) are opposite problems (SPEC §3), so they get colours far apart on the wheel
(orange vs blue) and never share a bar. The palette is Okabe-Ito, which stays distinguishable
for the common colour-vision deficiencies.
"""

from __future__ import annotations

# SPEC §3 step classes, in the order charts stack them: healthy first, then ours, then theirs.
STEP_CLASSES: tuple[str, ...] = (
    "ok", "client_timeout", "upstream_error", "refused", "cancelled", "client_error", "error")

CLASS_COLORS: dict[str, str] = {
    "ok": "#009E73",              # bluish green
    "client_timeout": "#E69F00",  # orange: client give-up (our configuration)
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

OUTCOME_COLORS: dict[str, str] = {
    "completed": "#009E73",
    "partial": "#F0E442",
    "exhausted": "#D55E00",
    "failed": "#0072B2",
    "cancelled": "#999999",
    "unknown": "#BBBBBB",
}

RECONCILE_COLORS: dict[str, str] = {
    "landed": "#009E73",
    "not_landed": "#D55E00",
    "unknown": "#999999",
    "orphan": "#CC79A7",
}

# Lines that mark something on a chart rather than a class.
DEADLINE = "#D55E00"
RESERVE = "#CC79A7"
REMAINING = "#0072B2"
CAP = "#000000"
P95 = "#E69F00"
THRESHOLD = "#D55E00"
NEUTRAL = "#56B4E9"         # single-series bars that are not a class (runs, shares)
COMPARE = "#999999"         # the comparison series (completed runs, previous period)
# Series that are not classes (one per agent): blue, orange, green, purple, sky blue, grey.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#999999", "#8C564B")
PERCENTILE_COLORS = {"p50": "#009E73", "p90": "#E69F00", "p99": "#D55E00"}


def class_color(name: str) -> str:
    return CLASS_COLORS.get(name, "#BBBBBB")
