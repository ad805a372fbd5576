"""Dashboard pages under Streamlit's AppTest on the bundled sample traces (ui.sample_db, which
each test module makes its fixture): a page opened with the sample's two weeks in its URL
(failing on any exception or error it shows), what the `queries` functions return for the same
filters, and the page's Plotly figures."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from queries import reports
from queries.filters import Filters
from store import connect
from tests.support import ui

FILTERS = Filters.parse(ui.SINCE, ui.UNTIL)
PREVIOUS = Filters.parse("2026-11-02", ui.SINCE)
PARAMS = {"range": "custom", "since": ui.SINCE, "until": ui.UNTIL}


def query(db: str, name: str, filters: Filters = FILTERS) -> pd.DataFrame:
    con = connect(db, read_only=True)
    try:
        return getattr(reports, name)(con, filters)
    finally:
        con.close()


def open_page(page: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in (PARAMS if params is None else params).items():
        at.query_params[key] = value
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def plotly_array(value: object) -> np.ndarray:
    """Plotly JSON sends numeric arrays base64-encoded as {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            array = array.reshape([int(n) for n in str(value["shape"]).split(",")])
        return array
    return np.asarray(value)


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by title."""
    found = {}
    for element in at.get("plotly_chart"):
        spec = json.loads(element.proto.spec)
        title = spec["layout"].get("title", {}).get("text", "")
        found[title] = spec
    return found


def trace(spec: dict, name: str) -> dict:
    return next(t for t in spec["data"] if t.get("name") == name)


def open_simulate() -> AppTest:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in PARAMS.items():
        at.query_params[key] = value
    at.switch_page("app_pages/simulate.py")
    at.run()
    check(at)
    return at


def check(at: AppTest) -> None:
    """The page ran without an exception and shows no error."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def chart(at: AppTest, title: str) -> dict:
    """The Plotly figure titled `title`, failing if the page has none."""
    for element in at.get("plotly_chart"):
        spec = json.loads(element.proto.spec)
        if spec["layout"].get("title", {}).get("text") == title:
            return spec
    raise AssertionError(f"no chart {title!r}")
