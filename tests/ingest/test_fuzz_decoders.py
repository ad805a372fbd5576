"""Property-based and mutation fuzzing of every decoder: protobuf, OTLP JSON, JSON
lines, length-prefixed streams, gzip, trace files and the OTLP/HTTP and gRPC receivers.

Mutated real payloads never crash a decoder (only our documented rejection errors), never hang
(a watchdog per example), never produce a row the writer cannot store, and every rejection says
why (see tests/support/fuzz_harness.py for the promise checked). Examples are derandomized so CI is
repeatable and sized to stay in CI's budget; tests/long/fuzz_long.py runs the same checks at random
for as long as asked.
"""

from __future__ import annotations

import gzip
import http.client
import json
import tracemalloc
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ingest.files.sources import GunzipReader
from tests.support import fuzz_harness as fuzz
from tests.support.otlp_files import request, sdk_spans
from tests.support.receivers import running_receivers

SEEDS = fuzz.seeds()
DOCUMENT = json.loads(SEEDS["json"])
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
WATCHDOG_SECONDS = 10.0  # a decode of these few-kB inputs takes about a millisecond


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


edits = st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1), st.integers(0, 1 << 16),
                           st.binary(min_size=1, max_size=8)), min_size=1, max_size=6)


@pytest.mark.slow
@_settings(300)
@given(seed=st.sampled_from(["protobuf", "prefixed"]), changes=edits)
def test_mutated_protobuf_bodies_are_decoded_or_refused_with_a_reason(
        seed: str, changes: list[fuzz.Edit]) -> None:
    body = fuzz.apply_edits(SEEDS[seed], changes)
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.protobuf_body(body)
        fuzz.receiver_protobuf_body(body)


@_settings(200)
@given(seed=st.sampled_from(["json", "jsonl"]), changes=edits)
def test_mutated_json_bodies_are_decoded_or_refused_with_a_reason(
        seed: str, changes: list[fuzz.Edit]) -> None:
    body = fuzz.apply_edits(SEEDS[seed], changes)
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.json_body(body)


@pytest.mark.slow
@_settings(300)
@given(seed=st.integers(0, 2**32), rounds=st.integers(1, 4))
def test_json_documents_with_hostile_values_in_any_field(seed: int, rounds: int) -> None:
    import random

    body = fuzz.mutate_json(DOCUMENT, random.Random(seed), rounds)
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.json_body(body)


@_settings(150)
@given(body=st.binary(max_size=512))
def test_arbitrary_bytes_as_protobuf_json_and_gzip(body: bytes) -> None:
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.protobuf_body(body)
        fuzz.receiver_protobuf_body(body)
        fuzz.json_body(body)
        fuzz.gzip_body(body, fuzz.protobuf_body)
        fuzz.gzip_body(b"\x1f\x8b\x08\x00" + body, fuzz.json_body)


@pytest.mark.slow
@_settings(120)
@given(seed=st.sampled_from(sorted(SEEDS)), changes=edits, compress=st.booleans(),
       mutate_compressed=st.booleans())
def test_mutated_trace_files_of_every_form(tmp_path: Path, seed: str, changes: list[fuzz.Edit],
                                           compress: bool, mutate_compressed: bool) -> None:
    data = SEEDS[seed]
    if compress and mutate_compressed:
        data = fuzz.apply_edits(fuzz.gzipped(data), changes)  # corrupt gzip itself
    else:
        data = fuzz.apply_edits(data, changes)
        data = fuzz.gzipped(data) if compress else data
    with fuzz.watchdog(WATCHDOG_SECONDS):
        fuzz.file_pieces(data, tmp_path)


uint64 = st.integers(0, 2**64 - 1)
uint32 = st.integers(0, 2**32 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)


@pytest.mark.slow
@_settings(200)
@given(kind=int32, code=int32, flags=uint32, start=uint64, end=uint64, event_time=uint64,
       dropped=st.tuples(uint32, uint32, uint32, uint32), grpc_code=st.integers(-(2**63),
                                                                               2**63 - 1),
       trace_id=st.binary(max_size=17), span_id=st.binary(max_size=9))
def test_protobuf_span_fields_at_any_value_are_stored_or_refused_alone(
        kind: int, code: int, flags: int, start: int, end: int, event_time: int,
        dropped: tuple[int, int, int, int], grpc_code: int, trace_id: bytes,
        span_id: bytes) -> None:
    """Every field at the edge of its wire type: the span is stored or refused with a reason,
    and its neighbour in the same request is stored regardless."""
    message = request(sdk_spans(runs=1)[:1])
    good = message.resource_spans[0].scope_spans[0].spans[0]
    hostile = message.resource_spans[0].scope_spans[0].spans.add()
    hostile.CopyFrom(good)
    hostile.span_id = span_id
    hostile.trace_id = trace_id
    hostile.kind, hostile.status.code, hostile.flags = kind, code, flags
    hostile.start_time_unix_nano, hostile.end_time_unix_nano = start, end
    hostile.dropped_attributes_count, hostile.dropped_events_count = dropped[:2]
    hostile.dropped_links_count = dropped[2]
    event = hostile.events.add()
    event.time_unix_nano, event.dropped_attributes_count = event_time, dropped[3]
    attribute = hostile.attributes.add()
    attribute.key, attribute.value.int_value = "rpc.grpc.status_code", grpc_code
    body = message.SerializeToString()
    with fuzz.watchdog(WATCHDOG_SECONDS):
        assert fuzz.protobuf_body(body) == "accepted"  # the good span at least
        assert fuzz.receiver_protobuf_body(body) == "accepted"


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory):
    with running_receivers(tmp_path_factory.mktemp("fuzz-http")) as running:
        yield running


def _post(url: str, body: bytes, content_type: str, encoding: str | None
          ) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    try:
        connection.request("POST", parts.path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.slow
@_settings(120)
@given(seed=st.sampled_from(["protobuf", "json"]), changes=edits, compress=st.booleans())
def test_http_receiver_answers_every_mutated_body(receiver, seed: str,
                                                  changes: list[fuzz.Edit],
                                                  compress: bool) -> None:
    body = fuzz.apply_edits(SEEDS[seed], changes)
    if compress:
        body = fuzz.gzipped(body)
    content_type = "application/x-protobuf" if seed == "protobuf" else "application/json"
    status, answer = _post(receiver.http_url, body, content_type, "gzip" if compress else None)
    assert status in (200, 400, 413), status
    if status != 200:
        problem = status_pb2.Status()
        if seed == "protobuf":
            problem.ParseFromString(answer)
        else:
            problem.code, problem.message = json.loads(answer)["code"], json.loads(
                answer)["message"]
        assert problem.code in (3, 8) and problem.message.strip()


@pytest.mark.slow
@_settings(50)
@given(seed=st.integers(0, 2**32), rounds=st.integers(1, 4))
def test_http_receiver_stores_or_refuses_json_with_hostile_values(receiver, seed: int,
                                                                 rounds: int) -> None:
    """Hostile values in any field, all the way into the database: a 200 means committed, so
    every row the decoder accepted was also one DuckDB could store."""
    import random

    body = fuzz.mutate_json(DOCUMENT, random.Random(seed), rounds)
    status, answer = _post(receiver.http_url, body, "application/json", None)
    assert status in (200, 400), (status, answer[:300])
    if status == 400:
        assert json.loads(answer)["message"].strip()


@pytest.fixture(scope="module")
def grpc_export(receiver):
    with grpc.insecure_channel(receiver.grpc_target) as channel:
        yield channel.unary_unary(EXPORT, request_serializer=None,
                                  response_deserializer=ExportTraceServiceResponse.FromString)


@_settings(80)
@given(changes=edits)
def test_grpc_receiver_answers_every_mutated_body(grpc_export, changes: list[fuzz.Edit]
                                                  ) -> None:
    body = fuzz.apply_edits(SEEDS["protobuf"], changes)
    try:
        grpc_export(body, timeout=30)
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                                grpc.StatusCode.RESOURCE_EXHAUSTED), error
        assert error.details().strip()


def test_http_receiver_still_serves_after_the_fuzzing(receiver) -> None:
    status, _ = _post(receiver.http_url, SEEDS["protobuf"], "application/x-protobuf", None)
    assert status == 200


def _peak(function, *args) -> int:  # noqa: ANN001 - a test helper
    tracemalloc.start()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_memory_of_a_big_mutated_input_stays_bounded() -> None:
    """A 500-span request decoded whole, then mutated: no mutation makes decoding keep more
    than the valid request needs (measured peak, Python allocations, ×2 plus 8 MB slack), and a
    length field claiming an enormous size allocates nothing for it."""
    message = ExportTraceServiceRequest()
    spans = sdk_spans(runs=1)
    for _ in range(100):
        message.MergeFrom(request(spans))
    body = message.SerializeToString()
    fuzz.protobuf_body(body)  # pays pyarrow's one-time set-up outside the measurement
    valid_peak = _peak(fuzz.protobuf_body, body)
    import random

    rng = random.Random(6)
    worst = 0
    for _ in range(6):
        mutated = fuzz.mutate(body, rng, 2)
        worst = max(worst, _peak(fuzz.protobuf_body, mutated))
    # Field 1 (resourceSpans) claiming 2**62 bytes, then a few bytes of it.
    liar = b"\x0a" + bytes([0x80] * 8 + [0x40]) + body[:64]
    liar_peak = _peak(fuzz.protobuf_body, liar)
    print(f"\nbody {len(body):,} B: valid peak {valid_peak / 1e6:.1f} MB, worst mutated "
          f"{worst / 1e6:.1f} MB, lying length {liar_peak / 1e3:.0f} kB")
    assert worst <= 2 * valid_peak + 8_000_000
    assert liar_peak < 1_000_000


@pytest.mark.slow
def test_a_gzip_bomb_in_a_file_inflates_in_bounded_pieces(tmp_path: Path) -> None:
    """1 GB of zeros compresses to ~1 MB; the file reader's peak stays far below the size."""
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        zeros = bytes(1 << 20)
        for _ in range(256):
            out.write(zeros)  # 256 MB inflated, ~250 kB on disk
    tracemalloc.start()
    try:
        with open(bomb, "rb") as raw:
            reader = GunzipReader(raw)
            buffer = bytearray(1 << 16)
            while reader.readinto(buffer):
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000, peak
    with fuzz.watchdog(60):
        assert fuzz.file_pieces(bomb.read_bytes(), tmp_path) == "refused"
