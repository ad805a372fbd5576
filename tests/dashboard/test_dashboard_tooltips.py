"""Every chart on every page has a tooltip written for it: each visible trace
carries a hovertemplate (or, on the run view's waterfall, a hover text per step), none falls
back to Plotly's default, and the step key is shown in full."""

from __future__ import annotations

import json

import pytest

from dashboard import colors
from queries import reports
from store import connect
from tests.support.apptest import FILTERS, PARAMS, open_page

PAGES = ["overview", "attribution", "cost", "failures", "utilisation", "reconciliation", "run",
         "compare", "simulate"]


def _exhausted(db: str) -> str:
    con = connect(db, read_only=True)
    try:
        runs = reports.runs(con, FILTERS)
    finally:
        con.close()
    return str(runs[runs["exhausted"].fillna(False).astype(bool)].iloc[0]["run_id"])


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_trace_has_a_tooltip_of_its_own(db: str, page: str) -> None:
    params = {**PARAMS, "run": _exhausted(db)} if page in ("run", "compare") else PARAMS
    at = open_page(page, params)
    specs = [json.loads(element.proto.spec) for element in at.get("plotly_chart")]
    assert specs, f"{page} draws charts"
    for spec in specs:
        title = spec["layout"].get("title", {}).get("text", "")
        for trace in spec["data"]:
            if trace.get("hoverinfo") == "skip" or trace.get("x") == [None]:
                continue  # a culprit outline or a legend-only entry: nothing to hover
            written = trace.get("hovertemplate") or (
                trace.get("hoverinfo") == "text" and trace.get("hovertext"))
            assert written, (page, title, trace.get("name"))
            # wine is the budget and the deadline, drawn as lines (shapes), never a series
            assert colors.WINE not in json.dumps({k: trace.get(k) for k in ("marker", "line")}), \
                (page, title, trace.get("name"))
            if isinstance(written, str) and trace.get("orientation") == "h":
                # the key, in full (the axis label, or a copy of it in customdata)
                assert "%{y}" in written or "step key %{customdata" in written, \
                    (page, title, trace.get("name"))
