"""The committed real-library fixtures can be made again from nothing: the cheapest one (plain
httpx, old HTTP semconv) is regenerated here in a temp folder, its pinned venv created with uv
from the package registry, and both what the harness logged and what the real exporter sent
keep the committed shape (ids, times and ports aside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.real_fixtures.generate import BY_NAME, MIN_MARGIN_MS, generate
from tests.real_fixtures.show import spans
from tests.support.real_fixture_compare import FIXTURES, load_truth

# Builds a venv from the package registry (tests/conftest.py skips it when that does not
# answer); a whole real-library run too.
pytestmark = [pytest.mark.network, pytest.mark.slow]


def _truth_shape(truth: dict[str, Any]) -> list[dict[str, Any]]:
    return [{
        "agent": run["agent"], "budget_ms": run["budget_ms"],
        "steps": [(s["kind"], s["name"], s["class"], s["call"], s["top_level"])
                  for s in run["steps"]],
        "culprit": run["culprit"], "holder": run["holder"], "writes": run["writes"],
    } for run in truth["runs"]]


def _span_shape(path: Path) -> list[tuple]:
    """Each span as name, kind, status, attribute keys, event names and its parent's name,
    in start order within its trace, traces in start order."""
    found = spans(path)
    by_id = {span["spanId"]: span for span in found}
    traces: dict[str, list[dict]] = {}
    for span in sorted(found, key=lambda s: int(s["startTimeUnixNano"])):
        traces.setdefault(span["traceId"], []).append(span)
    return [tuple(
        (span["name"], span.get("kind"), span.get("status", {}).get("code"),
         tuple(sorted(a["key"] for a in span.get("attributes", []))),
         tuple(e["name"] for e in span.get("events", [])),
         by_id.get(span.get("parentSpanId", ""), {}).get("name"))
        for span in trace) for trace in traces.values()]


def test_httpx_fixture_regenerates_from_scratch(tmp_path: Path) -> None:
    truth = generate(BY_NAME["httpx"], tmp_path / "otlp", tmp_path / "truth", tmp_path / "venvs")
    committed = load_truth(FIXTURES / "truth" / "httpx.json")
    assert _truth_shape(truth) == _truth_shape(committed)
    assert truth["versions"] == committed["versions"]
    assert truth["fake_servers"]["tool_writes_received"] == 2
    for run in truth["runs"]:
        assert run["deadline_margin_ms"] >= MIN_MARGIN_MS, run
        assert run["culprit_margin_ms"] is None or run["culprit_margin_ms"] >= MIN_MARGIN_MS, run
    assert _span_shape(tmp_path / "otlp" / "httpx.otlp.pb") == \
        _span_shape(FIXTURES / "otlp" / "httpx.otlp.pb")
