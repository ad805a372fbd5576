"""docs/metrics.md §3 as revised for other instrumentations: normalised error texts with their
codes, the older http.status_code, status messages, the OpenAI Agents SDK's timeout result, and rule
6's roll-up of a nested span's outcome into a step without evidence of its own. Hand-built traces of
the real OpenTelemetry SDK (tests/support/trace_builder.py)."""

from __future__ import annotations

import pytest

from tests.support.convention_traces import TEXT_CASES, roll_up_trace, text_trace
from tests.support.trace_builder import open_db, step_rows, store


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    b, run = text_trace()
    con = open_db(tmp_path_factory.mktemp("texts"))
    store(con, b.finished())
    rows = step_rows(con, b.trace_id(run))
    con.close()
    return {name: row["class"] for name, row in rows.items()}


@pytest.mark.parametrize("name,expected", [(c[0], c[5]) for c in TEXT_CASES])
def test_text_class(texts: dict[str, str], name: str, expected: str) -> None:
    assert texts[name] == expected


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    b, run = roll_up_trace()
    con = open_db(tmp_path_factory.mktemp("rollup"))
    store(con, b.finished())
    rows = step_rows(con, b.trace_id(run))
    con.close()
    return {name: row["class"] for name, row in rows.items()}


@pytest.mark.parametrize("name,expected", [
    ("error tool around a 503", "upstream_error"),
    ("unset tool around a 503", "upstream_error"),
    # docs/metrics.md §3 rule 6 rolls up whatever the step's status: several instrumentations
    # (OpenInference among them) mark every tool that returns OK, so OK is no evidence of its own
    ("ok tool around a 503", "upstream_error"),
    ("retried 503 then 200", "error"),  # the last call's 200 gives no class
    ("own specific class stays", "client_timeout"),
    ("fallback error takes a nested timeout", "client_timeout"),
    ("tie on end: later start wins", "client_timeout"),
    # a wrapper exception (rule 4 gives it only `error`) recorded after the 503 is passed over
    ("a later wrapper exception is passed over", "upstream_error"),
    ("evidence two levels down", "cancelled"),
])
def test_roll_up(rolled: dict[str, str], name: str, expected: str) -> None:
    assert rolled[name] == expected
