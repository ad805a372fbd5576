"""The overview's trend chart: buckets follow the range (hours for a day, days otherwise), a
bucket without runs is a bar at zero, and each quantity has its own axis with round ticks."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from dashboard import figures, summaries
from queries.filters import Filters
from tests.support.apptest import charts, open_page, plotly_array, query, trace

UTC = dt.UTC


def _runs(starts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"start": starts, "budget_ms": 1000.0, "exhausted": False,
                         "utilisation": 0.5})


def test_days_without_runs_stay_at_zero() -> None:
    runs = _runs(["2026-11-16T08:00:00.000Z", "2026-11-19T09:00:00.000Z"])
    since, until = dt.datetime(2026, 11, 16, tzinfo=UTC), dt.datetime(2026, 11, 21, tzinfo=UTC)
    daily = summaries.daily(runs, since, until)
    assert [b.strftime("%m-%d") for b in daily["bucket"]] == [
        "11-16", "11-17", "11-18", "11-19", "11-20"]
    assert list(daily["runs"]) == [1, 0, 0, 1, 0]
    assert daily["exhaustion_rate"].isna().tolist() == [False, True, True, False, True]


def test_a_day_is_bucketed_by_hour() -> None:
    since = dt.datetime(2026, 11, 29, 12, 30, tzinfo=UTC)
    until = since + dt.timedelta(hours=24)
    assert summaries.trend_bucket(since, until) == "hour"
    assert summaries.trend_bucket(since, since + dt.timedelta(days=7)) == "day"
    daily = summaries.daily(_runs(["2026-11-29T12:45:00.000Z", "2026-11-30T03:10:00.000Z"]),
                            since, until)
    assert len(daily) == 25  # 12:00 … 12:00 the next day, the first and last partial
    assert daily["runs"].sum() == 2
    assert daily.set_index("bucket").loc[pd.Timestamp("2026-11-30T03:00Z"), "runs"] == 1


@pytest.mark.parametrize("top, dtick, tickformat", [
    (0.44, 0.1, ".0%"), (0.031, 0.01, ".0%"), (1.001, 0.25, ".0%"), (0.004, 0.001, ".1%")])
def test_rate_axes_have_round_ticks(top: float, dtick: float, tickformat: str) -> None:
    axis = figures.rate_axis(top)
    assert axis["dtick"] == dtick and axis["tickformat"] == tickformat
    assert axis["range"][1] >= top  # type: ignore[index]


def test_overview_last_24_hours_is_hourly_on_three_axes(db: str) -> None:
    since, until = "2026-11-29T12:00:00Z", "2026-11-30T12:00:00Z"
    at = open_page("overview", {"range": "custom", "since": since, "until": until})
    spec = charts(at)["Hourly runs, exhaustion rate and utilisation"]
    runs = query(db, "runs", Filters.parse(since, until))
    bars = trace(spec, "runs")
    assert len(bars["x"]) == 24
    assert plotly_array(bars["y"]).sum() == len(runs)
    axes = {trace(spec, name)["yaxis"] for name in ("exhaustion rate", "utilisation p50")}
    assert axes == {"y2", "y3"}  # each on an axis of its own, none on the runs axis
    for axis in ("yaxis2", "yaxis3"):
        assert spec["layout"][axis]["tickformat"].endswith("%")
        assert spec["layout"][axis]["dtick"] in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5)
    hover = trace(spec, "exhaustion rate")["hovertemplate"]
    assert "runs with a budget" in hover and "%{customdata[1]:,}" in hover
    assert json.dumps(spec).count("hovertemplate") >= 4


def test_overview_trend_hovers_the_counts(db: str) -> None:
    at = open_page("overview")
    spec = charts(at)["Daily runs, exhaustion rate and utilisation"]
    rate = trace(spec, "exhaustion rate")
    custom = plotly_array(rate["customdata"]).astype(float)
    y = plotly_array(rate["y"]).astype(float)
    shown = ~np.isnan(y)
    np.testing.assert_allclose(custom[shown, 0] / custom[shown, 1], y[shown])
