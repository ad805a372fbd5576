"""Fuzzing the OTLP logs decoders: hostile bytes and field values give stored records
or refusals with a reason, never another exception, and never a row the writer cannot store.
Seeds are log records made by the OpenTelemetry SDK and encoded by its own OTLP encoder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from duckdb import DuckDBPyConnection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from ingest.decode.log_flatten import flatten_logs_request
from store import SpanWriter, connect
from tests.support import fuzz_harness as fuzz
from tests.support.otlp_files import length_prefixed, otlp_json
from tests.support.otlp_logs import logs_request, run_with_logs

REQUEST = logs_request(run_with_logs().logs)
SEEDS = {"protobuf": REQUEST.SerializeToString(),
         "json": json.dumps(otlp_json(REQUEST)).encode(),
         "prefixed": length_prefixed([REQUEST, REQUEST])}
WATCHDOG_SECONDS = 10.0


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


edits = st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1), st.integers(0, 1 << 16),
                           st.binary(min_size=1, max_size=8)), min_size=1, max_size=6)


@pytest.mark.slow
@_settings(300)
@given(seed=st.sampled_from(["protobuf", "json"]), changes=edits)
def test_mutated_logs_bodies_are_decoded_or_refused_with_a_reason(
        seed: str, changes: list[fuzz.Edit]) -> None:
    body = fuzz.apply_edits(SEEDS[seed], changes)
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.logs_body(body, json_body=seed == "json")


@_settings(150)
@given(body=st.binary(max_size=512))
def test_arbitrary_bytes_as_logs_protobuf_and_json(body: bytes) -> None:
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.logs_body(body)
        fuzz.logs_body(body, json_body=True)


@_settings(100)
@given(seed=st.sampled_from(sorted(SEEDS)), changes=edits, compress=st.booleans())
def test_mutated_logs_files_of_every_form(tmp_path: Path, seed: str, changes: list[fuzz.Edit],
                                          compress: bool) -> None:
    data = fuzz.apply_edits(SEEDS[seed], changes)
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.file_pieces(fuzz.gzipped(data) if compress else data, tmp_path)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBPyConnection]:
    """One database for the examples: opening a file applies the schema (~70 ms quiet), which
    was half of this test's time when each of its 150 examples opened its own."""
    with connect(tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb") as con:
        yield con


uint64 = st.integers(0, 2**64 - 1)
uint32 = st.integers(0, 2**32 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)


@pytest.mark.slow
@_settings(150)
@given(time=uint64, observed=uint64, severity=int32, flags=uint32,
       trace_id=st.binary(max_size=17), span_id=st.binary(max_size=9),
       text=st.text(max_size=20), body=st.text(max_size=40))
def test_log_record_fields_at_any_value_are_stored_or_refused_alone(
        fuzzed: DuckDBPyConnection, time: int, observed: int, severity: int, flags: int,
        trace_id: bytes, span_id: bytes, text: str, body: str) -> None:
    """Every field at the edge of its wire type: the record is stored or refused alone, and
    the good record beside it is stored either way (in one database for every example, as a
    server's writer stores batch after batch)."""
    request = ExportLogsServiceRequest()
    request.CopyFrom(REQUEST)
    records = request.resource_logs[0].scope_logs[0].log_records
    record = records[0]
    record.time_unix_nano, record.observed_time_unix_nano = time, observed
    record.severity_number, record.flags = severity, flags  # type: ignore[assignment]
    record.trace_id, record.span_id = trace_id, span_id
    record.severity_text, record.body.string_value = text, body
    batch = flatten_logs_request(request, where="fuzz")
    fuzz.check_rejections(batch.rejections)
    assert batch.log_count + sum(r.log_records for r in batch.rejections) == \
        sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
    before = fuzzed.execute("SELECT count(*) FROM log_records").fetchone()[0]
    result = SpanWriter(fuzzed).write(batch)
    assert result.logs_inserted + result.logs_duplicates == batch.log_count
    stored = fuzzed.execute("SELECT count(*) FROM log_records").fetchone()[0]
    assert stored - before == result.logs_inserted
    assert stored >= len(records) - 1
