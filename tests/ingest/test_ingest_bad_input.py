"""Bad input: a clear message naming the file (and line or offset), good spans in the same file
still loaded, nothing already stored lost or duplicated."""

from __future__ import annotations

import copy
import gzip
import io
import json
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.decode.proto_decode import iter_streamed_request
from ingest.files.loader import LoadSummary, load_files
from store import connect
from tests.support.otlp_files import length_prefixed, otlp_json, request, sdk_spans, varint


@pytest.fixture(scope="module")
def message() -> ExportTraceServiceRequest:
    return request(sdk_spans(runs=2))  # 2 traces × 4 spans, one resource, one scope


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = connect(tmp_path / "t.duckdb")
    yield connection
    connection.close()


def _load(con: duckdb.DuckDBPyConnection, path: Path) -> LoadSummary:
    return load_files(con, [path])


def _span_count(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM spans").fetchone()[0]


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _messages(summary: LoadSummary) -> list[str]:
    return [str(e) for examples in summary.rejections.examples.values() for e in examples]


def test_malformed_json_line_names_the_line_and_keeps_the_others(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    good = json.dumps(otlp_json(message))
    path = tmp_path / "traces.jsonl"
    path.write_text(good + "\n" + '{"resourceSpans": [ oops\n' + "\n")
    summary = _load(con, path)
    assert summary.spans_loaded == 8
    assert list(summary.rejections.counts) == ["malformed_json"]
    assert _messages(summary) == [f"{path} line 2 column 21: malformed JSON: Expecting value"]


def test_truncated_gzip_keeps_what_came_before(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    # Several lines with distinct traces, so that a cut near the end loses only the last ones.
    lines = []
    for index in range(40):
        document = otlp_json(message)
        for span in _spans(document):
            span["traceId"] = f"{index + 1:032x}"
            span.pop("links", None)
        lines.append(json.dumps(document))
    data = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(data[: len(data) * 3 // 4])
    summary = _load(con, path)
    assert 0 < summary.spans_loaded < 40 * 8
    assert summary.spans_loaded % 8 == 0  # whole lines only, never half a request
    # The cut line itself is refused as malformed, then the file as truncated.
    assert set(summary.rejections.counts) <= {"truncated", "malformed_json"}
    truncated = summary.rejections.examples["truncated"][0]
    assert "gzip data is truncated" in truncated.message
    assert str(path) in str(truncated)


def test_ids_of_the_wrong_length_refuse_only_their_span(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    _spans(document)[0]["traceId"] = "abcd"  # valid hex, 2 bytes
    _spans(document)[1]["spanId"] = "00000000000000000000"  # 10 bytes
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))
    summary = _load(con, path)
    assert summary.spans_loaded == 6
    assert summary.rejections.spans == {"bad_id": 2}
    messages = _messages(summary)
    assert "trace_id is 2 bytes, must be 16" in messages[0]
    assert f"{path} line 1, resource 0, scope 0, span 0" in messages[0]
    assert "span_id is 10 bytes, must be 8" in messages[1]


def test_wrong_length_ids_in_protobuf_are_refused_too(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    broken = copy.deepcopy(message)
    broken.resource_spans[0].scope_spans[0].spans[2].trace_id = b"\x01" * 15
    path = tmp_path / "traces.pb"
    path.write_bytes(broken.SerializeToString())
    summary = _load(con, path)
    assert summary.spans_loaded == 7
    assert "trace_id is 15 bytes, must be 16" in _messages(summary)[0]


def test_base64_ids_are_the_hex_pitfall_and_are_refused(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    # google.protobuf.json_format would silently decode this into 24 bytes of garbage.
    document = otlp_json(message)
    span = _spans(document)[0]
    span["traceId"] = "W47/98Z6ssq+gNUkwYWcoQ=="
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))
    summary = _load(con, path)
    assert summary.spans_loaded == 7
    assert "looks base64-encoded; OTLP JSON ids are hex" in _messages(summary)[0]


def test_hex_ids_are_stored_as_sent(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    sent = {(s["traceId"], s["spanId"]) for s in _spans(document)}
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))
    _load(con, path)
    assert set(con.execute("SELECT trace_id, span_id FROM spans").fetchall()) == sent


def test_non_utf8_json_refuses_only_the_span_holding_it(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    _spans(document)[3]["name"] = "MARKER"
    raw = json.dumps(document).encode().replace(b"MARKER", b"bad \xff\xfe name")
    path = tmp_path / "traces.jsonl"
    path.write_bytes(raw + b"\n")
    summary = _load(con, path)
    assert summary.spans_loaded == 7
    assert "text is not valid UTF-8" in _messages(summary)[0]
    assert "span 3" in _messages(summary)[0]


def test_non_utf8_protobuf_refuses_only_the_span_holding_it(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    marked = copy.deepcopy(message)
    marked.resource_spans[0].scope_spans[0].spans[5].name = "MARKER"
    raw = marked.SerializeToString().replace(b"MARKER", b"MA\xff\xfeER")
    path = tmp_path / "traces.pb"
    path.write_bytes(raw)
    summary = _load(con, path)
    assert summary.spans_loaded == 7
    assert list(summary.rejections.counts) == ["undecodable_span"]
    assert "byte offset" in _messages(summary)[0]


def test_a_trace_without_its_root_is_stored_with_a_warning(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    roots = [s for s in _spans(document) if not s.get("parentSpanId")]
    _spans(document)[:] = [s for s in _spans(document) if s.get("parentSpanId")]
    path = tmp_path / "children.json"
    path.write_text(json.dumps(document))
    summary = _load(con, path)
    assert summary.spans_loaded == 6 and not summary.rejections
    assert summary.traces_without_root_count == 2
    assert "have no root span" in "\n".join(summary.lines())
    # The root arriving later completes the trace.
    _spans(document)[:] = roots
    path.write_text(json.dumps(document))
    later = _load(con, path)
    assert later.spans_loaded == 2 and later.traces_without_root_count == 0


def test_spans_from_the_future_and_impossible_times_are_refused(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    spans = _spans(document)
    future = time.time_ns() + 7 * 24 * 3600 * 10**9
    spans[0]["startTimeUnixNano"], spans[0]["endTimeUnixNano"] = str(future), str(future + 1)
    spans[1]["startTimeUnixNano"] = "0"
    spans[2]["endTimeUnixNano"] = str(int(spans[2]["startTimeUnixNano"]) - 1)
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))
    summary = _load(con, path)
    assert summary.spans_loaded == 5
    text = "\n".join(_messages(summary))
    assert "starts in the future" in text
    assert "start_time_unix_nano is 0" in text
    assert "ends before it starts" in text


def test_json_variants_people_send_are_accepted(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    document = otlp_json(message)
    for span in _spans(document):
        span["startTimeUnixNano"] = int(span["startTimeUnixNano"])  # a number, not a string
        span["kind"] = "SPAN_KIND_CLIENT" if span["kind"] == 3 else span["kind"]
        span["somethingNew"] = {"from": "a future OTLP"}  # unknown fields are ignored
    document["resourceSpans"][0]["alsoNew"] = 1
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))
    summary = _load(con, path)
    assert summary.spans_loaded == 8 and not summary.rejections
    assert con.execute("SELECT count(*) FROM spans WHERE kind = 3").fetchone()[0] == 2


def test_unknown_content_and_missing_files_are_named(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("these are not traces\n")
    summary = load_files(con, [notes, tmp_path / "missing.json"])
    assert summary.rejections.counts == {"unknown_format": 1, "unreadable": 1}
    assert any(str(notes) in m and "not OTLP JSON" in m for m in _messages(summary))
    assert any("missing.json" in m and "no such file" in m for m in _messages(summary))


def test_a_truncated_message_stream_keeps_whole_messages(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    second = copy.deepcopy(message)
    for span in second.resource_spans[0].scope_spans[0].spans:
        span.trace_id = b"\x02" * 16
    data = length_prefixed([message, second])
    path = tmp_path / "traces.pb-stream"
    path.write_bytes(data[:-10])
    summary = _load(con, path)
    assert summary.spans_loaded == 8
    assert "message cut short" in _messages(summary)[0]


def test_bad_files_lose_and_duplicate_nothing_already_stored(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(otlp_json(message)))
    _load(con, good)
    before = con.execute("SELECT * FROM spans ORDER BY trace_id, span_id").fetchall()
    mixed = otlp_json(message)
    _spans(mixed)[0]["spanId"] = "zz"  # not hex
    bad = tmp_path / "mixed.jsonl"
    bad.write_text(json.dumps(mixed) + "\n{broken\n")
    summary = _load(con, bad)
    assert summary.spans_loaded == 0 and summary.spans_present == 7
    assert con.execute("SELECT * FROM spans ORDER BY trace_id, span_id").fetchall() == before


def test_one_huge_message_is_walked_span_by_span(message: ExportTraceServiceRequest) -> None:
    # With a tiny read-whole limit the decoder must walk into the resource and scope and
    # hand out pieces of at most 3 spans, keeping resource and scope on each piece.
    stream = io.BufferedReader(io.BytesIO(message.SerializeToString()))
    pieces = list(iter_streamed_request(stream, "big.pb", chunk_spans=3, read_whole_limit=64))
    sizes = [sum(len(ss.spans) for rs in p.resource_spans for ss in rs.scope_spans)
             for p, _ in pieces]
    assert sizes == [3, 3, 2]
    names = [s.name for p, _ in pieces for rs in p.resource_spans for ss in rs.scope_spans
             for s in ss.spans]
    assert names == [s.name for s in message.resource_spans[0].scope_spans[0].spans]
    for piece, rejections in pieces:
        assert not rejections
        assert piece.resource_spans[0].resource == message.resource_spans[0].resource
        assert piece.resource_spans[0].scope_spans[0].scope.name == "budgetscope.tests"


# A ResourceSpans claiming nearly 2**64 bytes, holding a Resource that claims nearly as many;
# an unknown top-level field claiming 2**64 - 1 bytes.
HUGE_FIELDS = {"resource_spans": b"\x0a" + varint(2**64 - 1) + b"\x0a" + varint(2**64 - 100),
               "unknown_field": b"\x7a" + varint(2**64 - 1) + b"\x0a\x00"}


@pytest.mark.parametrize("field", list(HUGE_FIELDS))
def test_a_length_prefix_past_any_file_is_refused_by_name(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, message: ExportTraceServiceRequest,
    field: str,
) -> None:
    """A field claiming about 2**64 bytes (found by test_fuzz_logs' mutations): asking the file
    for that many bytes at once raised OverflowError out of the loader; it is a truncated
    message, refused with the file's name and offset."""
    path = tmp_path / "traces.pb"
    path.write_bytes(message.SerializeToString() + HUGE_FIELDS[field])
    summary = _load(con, path)
    assert dict(summary.rejections.counts) == {"undecodable_protobuf": 1}
    end = path.stat().st_size  # where the claimed bytes ran out
    assert _messages(summary) == [
        f"{path} byte offset {end}: not a protobuf ExportTraceServiceRequest "
        f"(message truncated at byte offset {end})"]
