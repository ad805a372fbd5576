"""Every file form `budgetscope ingest` reads, checked against what the real OpenTelemetry SDK
produced (its spans, encoded by its own OTLP encoder), stored in a real DuckDB file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from ingest.files.loader import load_files
from store import connect
from tests.support.otlp_files import sdk_spans, write_every_form

FORMS = ["json", "jsonl", "pb", "pb-stream"]


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    return sdk_spans(runs=3)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, spans: list[ReadableSpan]) -> dict[str, Path]:
    return write_every_form(tmp_path_factory.mktemp("forms"), spans)


def _expected(span: ReadableSpan) -> dict[str, object]:
    """What the stored row must say, derived from the SDK span itself, not from protobuf."""
    attributes = {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}
    return {
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": format(span.context.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
        "name": span.name,
        "kind": span.kind.value + 1,  # the SDK's enum starts at INTERNAL=0, OTLP's at 1
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status_code": {0: 0, 1: 1, 2: 2}[span.status.status_code.value],
        "status_message": span.status.description or "",
        "service_name": span.resource.attributes["service.name"],
        "attributes": attributes,
        "events": [(e.name, e.timestamp, dict(e.attributes)) for e in span.events],
        "links": [(format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"),
                   dict(link.attributes)) for link in span.links],
    }


def _stored(db: Path) -> dict[tuple[str, str], dict[str, object]]:
    con = connect(db)
    rows = con.execute(
        "SELECT trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code,"
        " status_message, service_name, attributes, events, links FROM spans").fetchall()
    con.close()
    stored = {}
    for row in rows:
        (trace_id, span_id, parent, name, kind, start, end, status, message, service,
         attributes, events, links) = row
        stored[(trace_id, span_id)] = {
            "trace_id": trace_id, "span_id": span_id, "parent_span_id": parent, "name": name,
            "kind": kind, "start_ns": start, "end_ns": end, "status_code": status,
            "status_message": message, "service_name": service,
            "attributes": json.loads(attributes),
            "events": [(e["name"], e["time_ns"], json.loads(e["attributes"])) for e in events],
            "links": [(k["trace_id"], k["span_id"], json.loads(k["attributes"])) for k in links],
        }
    return stored


@pytest.mark.slow
@pytest.mark.parametrize("form", [*FORMS, *(f"{f}.gz" for f in FORMS)])
def test_every_form_stores_exactly_what_the_sdk_made(
    tmp_path: Path, files: dict[str, Path], spans: list[ReadableSpan], form: str
) -> None:
    db = tmp_path / "t.duckdb"
    con = connect(db)
    summary = load_files(con, [files[form]])
    con.close()
    assert not summary.rejections, summary.lines()
    assert summary.spans_loaded == len(spans)
    stored = _stored(db)
    expected = {(e["trace_id"], e["span_id"]): e for e in map(_expected, spans)}
    assert stored == expected


def test_typed_columns_are_filled_from_attributes(tmp_path: Path, files: dict[str, Path]) -> None:
    con = connect(tmp_path / "t.duckdb")
    load_files(con, [files["pb"]])
    write = con.execute(
        "SELECT budget_cap_ms, budget_allocated_ms, budget_remaining_ms, budget_side_effect,"
        " budget_effect_status, budget_idempotency_key, budget_attempt, budget_hedge,"
        " gen_ai_operation_name, gen_ai_tool_name, http_response_status_code, exception_types"
        " FROM spans WHERE name = 'execute_tool create_ticket' ORDER BY start_ns LIMIT 1"
    ).fetchone()
    assert write == (5000, 5000, 29000, "write", "possible", "key-0", 1, False,
                     "execute_tool", "create_ticket", 504, ["TimeoutError"])
    root = con.execute(
        "SELECT budget_total_ms, budget_reserve_ms, budget_run_outcome, gen_ai_agent_name"
        " FROM spans WHERE parent_span_id IS NULL ORDER BY start_ns LIMIT 1").fetchone()
    assert root == (30000, 2000, "completed", "research-agent")
    # rpc.grpc.status_code (int) and rpc.response.status_code (name) land in one typed column.
    codes = dict(con.execute(
        "SELECT name, any_value(grpc_status_code) FROM spans WHERE name IN"
        " ('reconcile create_ticket', 'chat gpt-x') GROUP BY name").fetchall())
    assert codes == {"reconcile create_ticket": 0, "chat gpt-x": 14}
    resource = con.execute("SELECT service_name, attributes->>'deployment.environment'"
                           " FROM resources").fetchall()
    assert resource == [("research-agent", "test")]
    con.close()


def test_loading_again_stores_nothing_new(tmp_path: Path, files: dict[str, Path],
                                          spans: list[ReadableSpan]) -> None:
    con = connect(tmp_path / "t.duckdb")
    first = load_files(con, [files["jsonl"]])
    # The same spans again, in every other form: all already present.
    again = load_files(con, [files[form] for form in files if form != "jsonl"])
    count = con.execute("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans"
                        ).fetchone()
    resources = con.execute("SELECT count(*) FROM resources").fetchone()
    con.close()
    assert first.spans_loaded == len(spans)
    assert again.spans_loaded == 0
    assert again.spans_present == len(spans) * (len(files) - 1)
    assert count == (len(spans), len(spans))
    assert resources == (1,)


def test_folders_are_walked(tmp_path: Path, files: dict[str, Path],
                            spans: list[ReadableSpan]) -> None:
    con = connect(tmp_path / "t.duckdb")
    summary = load_files(con, [next(iter(files.values())).parent])
    con.close()
    assert summary.files == len(files)
    assert summary.spans_loaded == len(spans)
    assert not summary.rejections


def test_json_and_protobuf_store_every_value_kind_alike(tmp_path: Path) -> None:
    # Values the SDK cannot make (bytes, kvlists, nested arrays, non-finite doubles), written
    # by hand as protobuf, then as OTLP JSON; both paths must store the very same row.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from tests.support.otlp_files import otlp_json

    message = ExportTraceServiceRequest()
    resource_spans = message.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name").value.string_value = "svc"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes(range(1, 17)), bytes(range(1, 9))
    span.name, span.kind = "kinds", 2
    span.start_time_unix_nano, span.end_time_unix_nano = 1_795_000_000_000_000_000, \
        1_795_000_001_000_000_000
    values = span.attributes
    values.add(key="raw").value.bytes_value = b"\x00\xffbytes"
    values.add(key="nan").value.double_value = float("nan")
    values.add(key="inf").value.double_value = float("-inf")
    values.add(key="big").value.int_value = 2**62
    nested = values.add(key="nested").value.kvlist_value.values.add(key="inner")
    nested.value.array_value.values.add().bool_value = True
    nested.value.array_value.values.add().string_value = "x"
    values.add(key="empty")
    span.status.code = 2
    (tmp_path / "a.pb").write_bytes(message.SerializeToString())
    (tmp_path / "b.json").write_text(json.dumps(otlp_json(message)))
    rows = []
    for name in ("a.pb", "b.json"):
        con = connect(tmp_path / f"{name}.duckdb")
        summary = load_files(con, [tmp_path / name])
        assert not summary.rejections, summary.lines()
        rows.append(con.execute("SELECT * EXCLUDE (received_at) FROM spans").fetchall()
                    + con.execute("SELECT * FROM resources").fetchall())
        con.close()
    assert rows[0] == rows[1]
    attributes = json.loads(rows[0][0][14])
    assert attributes == {"raw": {"bytesValue": "AP9ieXRlcw=="}, "nan": "NaN",
                          "inf": "-Infinity", "big": 2**62,
                          "nested": {"inner": [True, "x"]}, "empty": None}
