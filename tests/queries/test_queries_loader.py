"""The SQL loader refuses a folder that does not match its registry, and values never reach
SQL text; CSV rendering is deterministic."""

from __future__ import annotations

import pandas as pd
import pytest

from queries import loader, reports
from queries.filters import Filters
from queries.render import to_csv_bytes, to_json_text
from tests.support.fleet import build_fleet
from tests.support.trace_builder import open_db


def test_every_registered_query_has_a_header_and_loads():
    queries = loader.load_queries()
    assert set(queries) == loader.QUERY_NAMES
    assert all(q.doc for q in queries.values())


def _folder(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / f"{name}.sql").write_text(text)
    return tmp_path


def test_unknown_file_is_refused(tmp_path):
    folder = _folder(tmp_path, {"a": "-- name: a\n-- doc\nSELECT 1;",
                                "stray": "-- name: stray\n-- doc\nSELECT 1;"})
    with pytest.raises(loader.QueryFileError, match=r"unknown \['stray'\]"):
        loader.load_queries(folder, frozenset({"a"}))


def test_missing_file_is_refused(tmp_path):
    folder = _folder(tmp_path, {"a": "-- name: a\n-- doc\nSELECT 1;"})
    with pytest.raises(loader.QueryFileError, match=r"missing \['b'\]"):
        loader.load_queries(folder, frozenset({"a", "b"}))


@pytest.mark.parametrize("text", ["SELECT 1;", "-- name: other\n-- doc\nSELECT 1;",
                                  "-- name: a\nSELECT 1;"])
def test_header_is_required(tmp_path, text):
    with pytest.raises(loader.QueryFileError):
        loader.load_queries(_folder(tmp_path, {"a": text}), frozenset({"a"}))


class RecordingConnection:
    """A real DuckDB connection that remembers the SQL text it was given."""

    def __init__(self, con):
        self.con, self.texts = con, []

    def execute(self, text, parameters=None):
        self.texts.append(text)
        return self.con.execute(text, parameters) if parameters else self.con.execute(text)


def test_hostile_filter_value_never_reaches_sql_text(tmp_path):
    con = open_db(tmp_path)
    build_fleet(con)
    hostile = "' or 1=1 --"
    recording = RecordingConnection(con)
    for name, report in reports.REPORTS.items():
        frame = report(recording, Filters(agent=hostile))  # type: ignore[arg-type]
        assert frame.empty, name
    assert recording.texts and all(hostile not in text for text in recording.texts)
    assert all("1=1" not in text for text in recording.texts)


def test_csv_cells():
    frame = pd.DataFrame({
        "key": ["a,b", "plain"],
        "count": pd.array([3, None], dtype="Int64"),
        "flag": pd.array([True, None], dtype="boolean"),
        "share": [1 / 3, float("nan")],
        "wait_ms": [-0.0000001, 1234.56789],
    })
    assert to_csv_bytes(frame) == (
        b"key,count,flag,share,wait_ms\n"
        b'"a,b",3,true,0.333333,0.000\n'
        b"plain,,,,1234.568\n")
    assert '"share": 0.333333' in to_json_text(frame)
    assert '"flag": null' in to_json_text(frame)
