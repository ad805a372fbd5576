"""One colour per class, used by every chart, so that a colour means the same thing on every page.

Every colour a chart draws a line or a marker in stands out from the page in both of
Streamlit's themes: at least 3:1 (WCAG's contrast for graphics) against the light theme's white
and the dark theme's near-black (BACKGROUNDS, as Streamlit 1.67 draws them;
tests/dashboard/test_dashboard_palette.py measures every line and marker of every chart in both, and
tests/browser/test_browser_narrow.py every one drawn). That is a luminance between about 0.12
and 0.30: a black line (the cap, "all write steps") was 1.1:1 on the dark page, a wine
deadline 2.2:1, a sky-blue line 1.8:1 on the white one. Bars and areas keep the Okabe-Ito
fills; where a class's fill is too light for a mark (amber, grey), the mark takes
CLASS_MARKS' darker shade of it.

Client give-ups (`client_timeout`, our deadline fired) and upstream failures (`upstream_error`,
their availability) are opposite problems (docs/metrics.md §3), so they get colours far apart on the
wheel (orange vs blue) and never share a bar. The palette is Okabe-Ito, which stays distinguishable
for the common colour-vision deficiencies.
"""

from __future__ import annotations

from store import vocabulary

# docs/metrics.md §3 step classes, in the order charts stack them: healthy first, then ours, then
# theirs.
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
WINE = "#B5466F"
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
REMAINING = "#2F86B8"       # the budget left at each step's start (run view), a line
ALLOCATION = "#6B6B6B"      # the allocation a step got, beside the budget left (run view)
CAP = "#5F7A8F"             # slate: a tool's cap on its latency histogram
P95 = "#6B6B6B"
THRESHOLD = "#8C8C8C"
OUTLINE = "#7A7A7A"         # the outline of the culprit and the holder on the waterfall
ALL_WRITES = "#7A7A7A"      # the rate over all write steps, beside one line per key
GUIDE = "#8C8C8C"           # a guide drawn over a chart (the matrix's diagonal, a run's end)
INSIDE_TEXT, INSIDE_BOX = "#FFFFFF", "rgba(0, 0, 0, 0.6)"  # a label drawn on a bar's fill
NEUTRAL = "#56B4E9"         # single-series bars that are not a class (runs, shares)
LINE = "#2F86B8"            # a single-series line that is not a class (predicted utilisation)
COMPARE = "#BBBBBB"         # the comparison series' bars (completed runs, previous period)
COMPARE_LINE = "#8C8C8C"    # the same as a line: what actually happened, beside a prediction
# Money (docs/metrics.md §11): the cumulative spend is a single-series line; a call with no
# price adds nothing known to it and is marked in a colour of its own (its cost is unknown,
# never $0); the call that reached the dollar budget is marked as the waterfall marks a role.
SPEND = LINE
UNPRICED = "#9467BD"       # muted purple
CROSSING = OUTLINE
# One per agent (or tool): slate blue, dark cyan, olive, green, ochre, dark teal, purple.
SERIES = ("#6A5ACD", "#2E8FA8", "#8A8A2E", "#117733", "#A88A2B", "#2F8F80", "#AA4499")
# Percentiles in greys, told apart by the dash and the width as well (the tail widest).
PERCENTILE_COLORS = {"p50": "#8C8C8C", "p90": "#767676", "p99": "#646464"}

# A class's colour for a line or a marker: its fill where that stands out in both themes, a
# darker shade of it where the fill is too light on white (amber, grey).
CLASS_MARKS: dict[str, str] = {**CLASS_COLORS, "client_timeout": "#B07A00",
                               "cancelled": "#808080"}

# The page behind every chart: Streamlit's light and dark themes (Plotly's background is
# transparent under st.plotly_chart's Streamlit theme).
BACKGROUNDS = {"light": "#FFFFFF", "dark": "#171614"}
# WCAG 2.1's least contrast for graphics that carry meaning (1.4.11, non-text contrast).
LEAST_CONTRAST = 3.0


def class_color(name: str) -> str:
    return CLASS_COLORS.get(name, "#BBBBBB")


def class_mark(name: str) -> str:
    """A class's colour for a line or marker (CLASS_MARKS)."""
    return CLASS_MARKS.get(name, "#808080")


def luminance(colour: str) -> float:
    """WCAG 2.1's relative luminance of `#RRGGBB`."""
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    hex_digits = colour.lstrip("#")
    r, g, b = (int(hex_digits[i:i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG 2.1's contrast ratio of two colours, 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
