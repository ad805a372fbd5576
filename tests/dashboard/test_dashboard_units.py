"""The dashboard's pure parts, without Streamlit or a database: formatting and escaping, the
filters' URL form, one colour per class, and the figure builders."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from dashboard import colors, figures, fmt, run_figures
from dashboard.filters import FilterState, from_params

NOW = dt.datetime(2026, 11, 30, 12, 34, 56, tzinfo=dt.UTC)


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (0.25, "0.25 ms"), (850, "850 ms"), (12_345, "12.3 s"),
    (245_000, "4 min 5 s"), (72_400, "1 min 12 s"), (60_000, "60.0 s"), (59_960, "60.0 s"),
    (90_000, "1 min 30 s"), (60_100, "60.1 s"), (61_400, "1 min 1 s"),
    (59_940, "59.9 s"), (999.6, "1.0 s"), (600_000, "10 min"), (3_599_600, "1 h 00 min"),
    (7_380_000, "2 h 03 min"), (-90_000, "−1 min 30 s"), (None, "–"), (float("nan"), "–")])
def test_durations_read_in_the_right_unit(ms: float | None, text: str) -> None:
    assert fmt.duration(ms) == text


def test_shares_of_one_whole_add_up_to_100_percent_as_shown() -> None:
    # 15, 7 and 7 of 29 round to 51.7% + 24.1% + 24.1% = 99.9%
    assert fmt.percents_adding_up([15, 7, 7]) == ["51.7%", "24.2%", "24.1%"]
    assert fmt.percents_adding_up([1, 1, 1]) == ["33.4%", "33.3%", "33.3%"]
    assert fmt.percents_adding_up([0, 0]) == ["0.0%", "0.0%"]
    assert fmt.plural(1, "run") == "1 run" and fmt.plural(1800, "run") == "1,800 runs"


def test_escape_md_leaves_no_live_markdown_or_html() -> None:
    escaped = fmt.escape_md("<img src=x onerror=alert(1)> [click](javascript:alert(1))\n# h")
    assert escaped == ("\\<img src\\=x onerror\\=alert\\(1\\)\\> \\[click\\]\\(javascript\\:"
                       "alert\\(1\\)\\) \\# h")
    assert fmt.plot_text("<a href='javascript:x'>") == "&lt;a href=&#x27;javascript:x&#x27;&gt;"


def test_presets_end_now_rounded_up_to_the_minute() -> None:
    since, until = FilterState("7d").window(NOW)
    assert until == dt.datetime(2026, 11, 30, 12, 35, tzinfo=dt.UTC)
    assert since == until - dt.timedelta(days=7)
    previous = FilterState("7d").previous(NOW)
    assert previous is not None and previous.until == since
    assert FilterState("all").window(NOW) == (None, None)
    assert FilterState("all").previous(NOW) is None


def test_filters_round_trip_through_the_url() -> None:
    state = FilterState("custom", "2026-11-16", "2026-11-30T08:00:00Z", "support-agent")
    parsed, problems = from_params(state.query_params())
    assert parsed == state and not problems
    filters = parsed.filters(NOW)
    assert filters.since == dt.datetime(2026, 11, 16, tzinfo=dt.UTC)
    assert filters.until == dt.datetime(2026, 11, 30, 8, tzinfo=dt.UTC)
    assert from_params({}) == (None, [])
    assert from_params({"since": "2026-11-01"})[0] == FilterState("custom", "2026-11-01")


def test_bad_url_values_are_dropped_with_a_message() -> None:
    state, problems = from_params({"range": "fortnight"})
    assert state == FilterState() and "fortnight" in problems[0]
    state, problems = from_params({"range": "custom", "since": "2026-11-30",
                                   "until": "2026-11-01"})
    assert state is not None and state.until is None and "not before" in problems[0]
    state, problems = from_params({"range": "custom", "since": "soon"})
    assert state is not None and state.since is None and problems


def test_every_class_has_its_own_colour() -> None:
    assert set(colors.CLASS_COLORS) == set(colors.STEP_CLASSES)
    assert len(set(colors.CLASS_COLORS.values())) == len(colors.STEP_CLASSES)
    assert colors.CLASS_COLORS["client_timeout"] != colors.CLASS_COLORS["upstream_error"]


def test_failures_chart_keeps_give_ups_and_upstream_failures_apart() -> None:
    frame = pd.DataFrame({"step_key": ["tool:a", "tool:<b>"], "steps": [10, 5], "ok": [5, 1],
                          "client_timeouts": [3, 1], "upstream_errors": [2, 3], "refused": [0, 0],
                          "cancelled": [0, 0], "client_errors": [0, 0], "errors": [0, 0]})
    figure = figures.failures_by_step(frame)
    by_name = {t.name: t for t in figure.data}
    assert list(by_name["client give-up (client_timeout)"].x) == [1, 3]
    assert list(by_name["upstream failure (upstream_error)"].x) == [3, 2]
    assert "tool:&lt;b&gt;" in list(by_name["error"].y)


def test_failures_over_time_never_puts_two_classes_in_one_bar() -> None:
    days = pd.to_datetime(["2026-11-23", "2026-11-24"])
    frame = pd.DataFrame({"day": days, "client_timeout": [3, 0], "upstream_error": [2, 4],
                          "refused": [1, 0], "cancelled": [0, 0], "client_error": [0, 1],
                          "error": [0, 0]})
    figure = figures.class_counts_over_time(frame, "day", "Failed steps per day")
    assert figure.layout.barmode == "group"
    by_name = {t.name: t for t in figure.data}
    assert list(by_name["client give-up (client_timeout)"].y) == [3, 0]
    assert list(by_name["upstream failure (upstream_error)"].y) == [2, 4]


def test_waterfall_keeps_step_order_and_marks_the_deadline() -> None:
    start = 1_000 * 10**9
    summary = pd.Series({"start_ns": start, "end_ns": start + 12 * 10**9,
                         "latest_end_ns": start + 12 * 10**9, "deadline_ns": start + 10 * 10**9,
                         "budget_ms": 10_000, "reserve_ms": 1_000, "culprit_span_id": "a",
                         "holder_span_id": "b"})
    steps = pd.DataFrame({
        "span_id": ["a", "c", "b"], "step_key": ["tool:x", "tool:y", "model:m"],
        "step_level": [0, 1, 0], "step_class": ["ok", "upstream_error", "client_timeout"],
        "offset_ms": [0.0, 100.0, 8_000.0], "duration_ms": [8_000.0, 50.0, 4_000.0],
        "allocated_ms": [9_000, None, 4_000], "consumption_ms": [8_000.0, None, 2_000.0],
        "remaining_ms": [10_000, None, None], "number": ["1", "1.1", "2"]})
    figure = run_figures.waterfall(summary, steps)
    order = list(figure.layout.yaxis.categoryarray)
    assert [label.strip(" └") for label in order] == ["#1 tool:x", "#1.1 tool:y", "#2 model:m"]
    shapes = [s for s in figure.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert {round(s.x0, 3) for s in shapes} >= {10.0, 9.0}  # deadline, reserve (seconds)
    # the 50 ms upstream failure and the timeout each get a mark, whatever their width
    marked = next(t for t in figure.data if t.name.startswith("failed"))
    assert [label.strip(" └") for label in marked.y] == ["#1.1 tool:y", "#2 model:m"]
    # left at each top-level step's start: sent (10 s) or the deadline minus the start (2 s)
    left = next(t for t in figure.data if t.name == "budget left at its start")
    assert list(left.y) == [10.0, 2.0]
    given = next(t for t in figure.data if t.name == "allocation it got")
    assert list(given.y) == [9.0, 4.0]


def test_latency_chart_marks_the_cap_and_the_p95() -> None:
    calls = pd.DataFrame({"step_key": "tool:x", "duration_ms": [100.0 * i for i in range(1, 41)],
                          "cap_ms": 3_000})
    calls["class"] = ["client_timeout" if d >= 3_000 else "ok" for d in calls["duration_ms"]]
    figure = figures.latency_against_cap(calls, "tool:x")
    # the calls cut at their cap in amber, the client give-up's colour; the others not
    cut = next(t for t in figure.data if t.name.startswith("calls cut"))
    assert cut.marker.color == colors.class_color("client_timeout") and len(cut.x) == 11
    assert next(t for t in figure.data if t.name == "calls that finished").marker.color \
        == colors.NEUTRAL
    texts = [a.text for a in figure.layout.annotations]
    assert any(t.startswith("cap 3.0 s") for t in texts)
    assert any(t.startswith("p95 3.8 s") for t in texts)  # 0.95 quantile of 0.1 .. 4.0 s


def test_side_by_side_shares_put_completed_next_to_exhausted() -> None:
    shares = pd.DataFrame({"step_key": ["tool:a", "model:b"], "exhausted": [0.5, 0.2],
                           "completed": [0.1, 0.3]})
    figure = figures.share_side_by_side(shares)
    assert [t.name for t in figure.data] == ["completed runs", "exhausted runs"]
    assert list(figure.data[1].x) == [0.2, 0.5]


def test_the_start_up_warm_up_draws_every_figure_kind() -> None:
    """`budgetscope dashboard` and `serve` run this in a thread at start-up (its failures are
    only logged there), so here it must run clean: a renamed figure helper would otherwise
    quietly lose the head start."""
    from dashboard.server.warm_up import warm

    warm()


def test_full_week_presets_end_at_the_start_of_this_week() -> None:
    now = dt.datetime(2026, 12, 2, 15, 30, tzinfo=dt.UTC)  # a Wednesday of 2026-W49
    monday = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    assert FilterState("1w").window(now) == (monday - dt.timedelta(weeks=1), monday)
    assert FilterState("4w").window(now) == (monday - dt.timedelta(weeks=4), monday)
    # stable minute to minute, and on the Monday itself the week just begun is excluded
    later = now + dt.timedelta(minutes=7)
    assert FilterState("4w").filters(later) == FilterState("4w").filters(now)
    assert FilterState("1w").window(monday)[1] == monday


def test_class_colours_are_reserved_for_classes() -> None:
    """Regression: amber was client give-up on one page, p95 on another and an agent elsewhere."""
    reserved = {c.upper() for c in colors.CLASS_COLORS.values()}
    others = [*colors.SERIES, *colors.PERCENTILE_COLORS.values(), *colors.OUTCOME_COLORS.values(),
              *colors.RECONCILE_COLORS.values(), colors.DEADLINE, colors.RESERVE,
              colors.REMAINING, colors.P95, colors.THRESHOLD, colors.NEUTRAL, colors.COMPARE]
    assert not reserved & {c.upper() for c in others}
    # wine is the budget and the deadline only (it meant seven things, an agent among them)
    assert colors.DEADLINE == colors.BUDGET == colors.WINE
    assert colors.WINE not in [*colors.SERIES, *colors.PERCENTILE_COLORS.values(),
                               *colors.OUTCOME_COLORS.values(),
                               *colors.RECONCILE_COLORS.values(), colors.RESERVE,
                               colors.REMAINING, colors.ALLOCATION, colors.P95, colors.THRESHOLD,
                               colors.NEUTRAL, colors.COMPARE, *colors.CLASS_COLORS.values()]


def test_utilisation_panels_mark_their_own_percentiles_and_the_budget() -> None:
    # Each agent's lines sit on that agent's panel (its x axis, its y domain), spanning it.
    histogram = pd.DataFrame({"agent": ["a", "a", "b"], "bin_start": [0.0, 0.5, 0.9],
                              "bin_end": [0.05, 0.55, 0.95], "runs": [3, 2, 4]})
    percentiles = pd.DataFrame({"agent": ["a", "b"], "p50": [0.2, 0.9], "p90": [0.5, 0.92],
                                "p99": [0.54, None]})
    for cumulative in (False, True):
        figure = figures.utilisation_distribution(histogram, percentiles, cumulative)
        lines = {(s.xref, s.yref, s.x0, s.x1, s.y0, s.y1) for s in figure.layout.shapes}
        assert lines == {
            ("x", "y domain", 0.2, 0.2, 0, 1), ("x", "y domain", 0.5, 0.5, 0, 1),
            ("x", "y domain", 0.54, 0.54, 0, 1), ("x", "y domain", 1.0, 1.0, 0, 1),
            ("x2", "y2 domain", 0.9, 0.9, 0, 1), ("x2", "y2 domain", 0.92, 0.92, 0, 1),
            ("x2", "y2 domain", 1.0, 1.0, 0, 1)}
        deadline = [s for s in figure.layout.shapes if s.x0 == 1.0]
        assert {s.line.color for s in deadline} == {colors.DEADLINE}
