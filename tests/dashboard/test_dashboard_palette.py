"""Every chart line and marker stands out from the page in both themes: at least 3:1 (WCAG's
contrast for graphics) against the light theme's white and the dark theme's near-black
(dashboard/colors.py). In dark mode the Overview's p99 line was 1.1:1, Reconciliation's "all
write steps" 1.2:1, Failures' cap line 1.2:1, Utilisation's p99 marker and deadline line under
2.2:1. Measured on the charts every page draws from the bundled sample under AppTest (their
Plotly specs as sent to the browser); the browser test reads the same from the page in
Chromium (tests/browser/test_browser_narrow.py)."""

from __future__ import annotations

import json

import pytest

from dashboard import colors
from tests.support.apptest import PARAMS, open_page
from tests.support.ui import exhausted_run

# Pages and the charts they draw on the sample's two weeks.
PAGES = ("overview", "attribution", "cost", "failures", "utilisation", "reconciliation",
         "simulate")


def _colours(value: object) -> list[str]:
    """The colours a Plotly colour property names: one, or one per point; numbers (a
    colour scale's values) name none."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def marks(spec: dict) -> list[tuple[str, str]]:
    """(what, colour) of every line and marker of a chart: scatter lines and markers, the
    outlines of markers and bars, and the shapes (vertical and horizontal lines)."""
    found: list[tuple[str, str]] = []
    for trace in spec["data"]:
        kind = trace.get("type", "scatter")
        name = f"{kind} {trace.get('name', '')}"
        if kind == "scatter":
            mode = trace.get("mode", "lines+markers")
            if "lines" in mode:
                found += [(f"{name} line", c) for c in _colours(trace.get("line", {})
                                                                  .get("color"))]
            if "markers" in mode:
                found += [(f"{name} marker", c) for c in _colours(trace.get("marker", {})
                                                                    .get("color"))]
        found += [(f"{name} outline", c) for c in _colours(
            trace.get("marker", {}).get("line", {}).get("color"))]
    for shape in spec["layout"].get("shapes", []):
        found += [(f"shape {shape.get('type')}", c) for c in _colours(
            shape.get("line", {}).get("color"))]
    return found


def _hex(colour: str) -> str:
    if colour.startswith("#") and len(colour) == 7:
        return colour
    if colour.startswith("#") and len(colour) == 4:
        return "#" + "".join(ch * 2 for ch in colour[1:])
    raise AssertionError(f"a chart colour that is not #RRGGBB: {colour!r}")


def assert_stands_out(what: str, colour: str) -> None:
    for theme, background in colors.BACKGROUNDS.items():
        ratio = colors.contrast(_hex(colour), background)
        assert ratio >= colors.LEAST_CONTRAST, (
            f"{what} in {colour} is {ratio:.2f}:1 on the {theme} theme's {background}")


def test_contrast_is_wcags() -> None:
    assert colors.contrast("#FFFFFF", "#000000") == pytest.approx(21.0)
    assert colors.contrast("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)
    assert colors.contrast("#0E1117", "#0E1117") == 1.0


def test_every_line_and_marker_colour_of_the_palette_stands_out_in_both_themes() -> None:
    named = {"wine (budget, deadline)": colors.WINE, "reserve": colors.RESERVE,
             "remaining": colors.REMAINING, "allocation": colors.ALLOCATION,
             "cap": colors.CAP, "p95": colors.P95, "threshold": colors.THRESHOLD,
             "outline": colors.OUTLINE, "all writes": colors.ALL_WRITES,
             "guide": colors.GUIDE, "line": colors.LINE, "compare line": colors.COMPARE_LINE,
             "exhaustion rate": colors.OUTCOME_COLORS["exhausted"],
             "spend": colors.SPEND, "unpriced call": colors.UNPRICED,
             "crossing": colors.CROSSING,
             **{f"series {i}": c for i, c in enumerate(colors.SERIES)},
             **{f"percentile {p}": c for p, c in colors.PERCENTILE_COLORS.items()},
             **{f"class mark {k}": c for k, c in colors.CLASS_MARKS.items()}}
    for what, colour in named.items():
        assert_stands_out(what, colour)
    # a mark of a class is that class's colour, or a darker shade of the same hue
    assert set(colors.CLASS_MARKS) == set(colors.CLASS_COLORS)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_chart_of_every_page_draws_lines_and_marks_that_stand_out(db: str,
                                                                        page: str) -> None:
    at = open_page(page)
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert specs, f"{page} drew no chart"
    for spec in specs:
        title = spec["layout"].get("title", {}).get("text", "")
        for what, colour in marks(spec):
            assert_stands_out(f"{page}: {title}: {what}", colour)


@pytest.mark.slow
def test_the_run_views_waterfall_lines_and_marks_stand_out(db: str) -> None:
    at = open_page("run", {**PARAMS, "run": exhausted_run(db)})
    specs = {json.loads(chart.proto.spec)["layout"]["title"]["text"]: json.loads(
        chart.proto.spec) for chart in at.get("plotly_chart")}
    # the waterfall, and the cumulative spend of a run whose calls sent usage
    assert set(specs) == {"Steps against the deadline",
                          "Cumulative spend against the dollar budget"}
    for title, spec in specs.items():
        found = marks(spec)
        if title == "Steps against the deadline":
            assert any(what.startswith("shape") for what, _ in found)  # the deadline
        for what, colour in found:
            assert_stands_out(f"{title}: {what}", colour)


@pytest.mark.slow
def test_the_cumulative_spend_of_a_dollar_exhausted_run_stands_out(db: str) -> None:
    """Its dollar budget line, the crossing star, and a call with no price."""
    from tests.support.apptest import query
    cost = query(db, "cost")
    crossed = cost[cost["usd_exhausted"].fillna(False).astype(bool)
                   & cost["cost_crosser"].notna()].iloc[0]["run_id"]
    unpriced = cost[cost["unpriced_steps"] > 0].iloc[0]["run_id"]
    seen: set[str] = set()
    for run_id in (crossed, unpriced):
        at = open_page("run", {**PARAMS, "run": str(run_id)})
        for chart in at.get("plotly_chart"):
            spec = json.loads(chart.proto.spec)
            if spec["layout"]["title"]["text"] != "Cumulative spend against the dollar budget":
                continue
            for what, colour in marks(spec):
                seen.add(what)
                assert_stands_out(f"cumulative spend: {what}", colour)
    assert {"shape line", "scatter the call that reached the budget (crosser) marker",
            "scatter a call with no price (cost unknown) marker"} <= seen, seen
