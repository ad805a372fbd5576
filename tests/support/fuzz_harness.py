"""What every decoder promises about hostile bytes, as checks the fuzz tests and
tests/long/fuzz_long.py share (this module holds no tests).

The promise, for any bytes: the decoder returns rows it can store plus rejections, or raises one
of our documented rejection errors — never another exception; every rejection names a reason
and says what was wrong; whatever it accepts converts to the writer's Arrow schema (a row the
writer cannot store would fail its whole transaction, and the exporter would retry it for ever);
and it finishes in bounded time (a watchdog raises `Hang` out of a Python-level loop).

Seeds are real payloads: spans made by the OpenTelemetry SDK and encoded by its own OTLP
encoder, in every form we read (protobuf, OTLP JSON, JSON lines, length-prefixed stream, gzip).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from bench.support.otlp import RUN_BUDGET_KEYS, budget_run
from ingest.decode.flatten import flatten_request
from ingest.decode.proto_decode import UndecodableMessage, decode_request
from ingest.files.sources import read_pieces
from ingest.receivers.limits import BadBody, BodyTooLarge, gunzip_limited
from ingest.receivers.span_intake import SpanIntake, Undecodable
from store import TYPED_ATTRIBUTES, FlatBatch, Rejection
from store.testing import (
    BUDGET_BOUNDS,
    MAX_BUDGET_MS,
    RESOURCE_SCHEMA,
    SCOPE_SCHEMA,
    logs_to_arrow,
    rows_to_arrow,
    to_arrow,
)
from tests.support.otlp_files import length_prefixed, otlp_json, request, sdk_spans

# Interesting bytes for overwrites: varint continuation, field tags, JSON structure.
_SPECIAL = [b"\x00", b"\xff", b"\x80", b"\x7f", b"\x0a", b"\x12", b"\x1a", b"\x08",
            b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
            b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\u0000", b"\\ud800", b"\xc3\x28",
            b"null", b"-1", b"1e999", b"18446744073709551616", b"NaN"]


class Hang(AssertionError):
    """One example ran past its watchdog deadline."""


def seeds() -> dict[str, bytes]:
    """Valid payloads in every form, small enough that a mutation often hits structure."""
    spans = sdk_spans(runs=2)
    whole = request(spans)
    halves = [request(spans[:4]), request(spans[4:])]
    document = otlp_json(whole)
    return {
        "protobuf": whole.SerializeToString(),
        "json": json.dumps(document).encode(),
        "jsonl": b"".join(json.dumps(otlp_json(m)).encode() + b"\n" for m in halves),
        "prefixed": length_prefixed(halves),
    }


# One edit: (operation 0-5, where as a fraction of the length, a number, some bytes).
Edit = tuple[int, float, int, bytes]


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    """Flip a bit, overwrite with an interesting value, insert bytes, delete a run, duplicate
    a slice, or truncate; positions are fractions so that the same edits fit any seed."""
    buffer = bytearray(data)
    for operation, where, number, payload in edits:
        at = min(int(where * (len(buffer) + 1)), len(buffer))
        if operation == 0 and buffer:
            buffer[min(at, len(buffer) - 1)] ^= 1 << (number % 8)
        elif operation == 1:
            special = _SPECIAL[number % len(_SPECIAL)]
            buffer[at:at + len(special)] = special
        elif operation == 2:
            buffer[at:at] = payload or b"\x00"
        elif operation == 3:
            del buffer[at:at + 1 + number % 16]
        elif operation == 4 and buffer:
            start = number % len(buffer)
            buffer[at:at] = buffer[start:start + 1 + number % 64]
        elif operation == 5:
            del buffer[at:]
    return bytes(buffer)


def mutate(data: bytes, rng: random.Random, rounds: int) -> bytes:
    """`rounds` random edits (see apply_edits)."""
    edits = [(rng.randrange(6), rng.random(), rng.randrange(1 << 16),
              bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))))
             for _ in range(rounds)]
    return apply_edits(data, edits)


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread if the block runs longer than `seconds`."""
    def expired(*_: object) -> None:
        raise Hang(f"example still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_rejections(rejections: list[Rejection]) -> None:
    for rejection in rejections:
        assert rejection.reason and rejection.reason.replace("_", "").isalpha(), rejection
        assert rejection.message.strip(), rejection


def check_storable(batch: FlatBatch) -> None:
    """Everything accepted fits the writer's Arrow schema (the writer's first step)."""
    to_arrow(batch)
    rows_to_arrow(batch.resources, RESOURCE_SCHEMA)
    rows_to_arrow(batch.scopes, SCOPE_SCHEMA)
    assert batch.span_count == len(batch.spans["span_id"])
    assert batch.log_count == len(batch.logs["record_key_hi"])
    if batch.log_count:
        logs_to_arrow(batch)


def protobuf_body(body: bytes) -> str:
    """A protobuf request through decode_request and flatten_request (the salvaging decoder
    that file ingest uses for length-prefixed messages)."""
    try:
        decoded, rejections = decode_request(body, "fuzz")
    except UndecodableMessage as error:
        assert str(error).strip()
        return "undecodable"
    batch = flatten_request(decoded, where="fuzz")
    check_rejections(rejections + batch.rejections)
    check_storable(batch)
    return "accepted" if batch.span_count else "empty"


def _receiver_body(decode: Callable[[bytes, str], FlatBatch], body: bytes) -> str:
    try:
        batch = decode(body, "fuzz")
    except Undecodable as error:
        assert str(error).strip()
        return "undecodable"
    check_rejections(batch.rejections)
    check_storable(batch)
    return "accepted" if batch.span_count else "empty"


def receiver_protobuf_body(body: bytes) -> str:
    """An OTLP/HTTP or gRPC protobuf body through the receivers' own (fast) decoder."""
    return _receiver_body(SpanIntake.decode_protobuf, body)


def json_body(body: bytes) -> str:
    """An OTLP/HTTP JSON body, through the receivers' own JSON decoder."""
    return _receiver_body(SpanIntake.decode_json, body)


def gzip_body(body: bytes, decode: Callable[[bytes], str], limit: int = 1 << 20) -> str:
    """A gzip Content-Encoding body: inflated under the body limit, then decoded."""
    try:
        inflated = gunzip_limited(body, limit)
    except (BadBody, BodyTooLarge) as error:
        assert str(error).strip()
        return "refused"
    return decode(inflated)


def file_pieces(data: bytes, folder: Path) -> str:
    """A trace file of any form, through the file reader and flattener (no database)."""
    path = folder / "fuzz.trace"
    path.write_bytes(data)
    batch = FlatBatch()
    rejections: list[Rejection] = []
    for piece in read_pieces(path):
        rejections.extend(piece.rejections)
        piece.flatten(max_future_ns=24 * 3600 * 10**9, into=batch)
    check_rejections(rejections + batch.rejections)
    check_storable(batch)
    return "accepted" if batch.span_count else "refused"


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def scratch_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="budgetscope-fuzz-")


# Values that a structure-aware mutation puts in place of any node of an OTLP JSON document.
_HOSTILE_VALUES: list[object] = [
    None, True, False, 0, -1, 1.5, 2**31, 2**32, 2**63, 2**64, -(2**63) - 1, 10**30,
    float("nan"), float("inf"), "", "0", "-1", "18446744073709551616", "NaN", "Infinity",
    "\ud800", "zz", "AAAAAAAAAAAAAAAAAAAAAA==", "0" * 32, "f" * 33, [], {}, [None], {"": None},
    {"stringValue": 5}, {"intValue": "x"}, {"doubleValue": "1e999"}, {"bytesValue": "!!"},
    {"arrayValue": {"values": [{"kvlistValue": {"values": [{"key": 1}]}}]}},
]


def _nodes(node: object, path: tuple[object, ...] = ()) -> Iterator[tuple[object, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, (*path, index))


def mutate_json(document: object, rng: random.Random, rounds: int) -> bytes:
    """Replace `rounds` random nodes of a decoded OTLP JSON document with hostile values (or
    drop them), and encode it again (NaN as the bare token JSON parsers accept)."""
    document = json.loads(json.dumps(document))
    for _ in range(rounds):
        paths = [path for path in _nodes(document) if path]
        if not paths:
            break
        path = rng.choice(paths)
        parent: object = document
        for step in path[:-1]:
            parent = parent[step]  # type: ignore[index]
        if rng.random() < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(_HOSTILE_VALUES)  # type: ignore[index]
    return json.dumps(document).encode("utf-8", "surrogatepass")


def logs_body(body: bytes, json_body: bool = False) -> str:
    """An OTLP/HTTP or gRPC logs body (protobuf, or JSON) through the receivers' decoders."""
    from ingest.receivers import log_intake

    decode = log_intake.decode_json if json_body else log_intake.decode_protobuf
    try:
        batch = decode(body, "fuzz")
    except Undecodable as error:
        assert str(error).strip()
        return "undecodable"
    check_rejections(batch.rejections)
    check_storable(batch)
    return "accepted" if batch.log_count else "empty"


# ------------------------------------------------------------------ budget.* numbers
# Values that broke the derivation or that agents get wrong: units (a deadline in seconds,
# microseconds, nanoseconds), overflow, signs, non-finite and non-numbers.
NOW_MS = time.time_ns() // 10**6
NOTORIOUS_BUDGET_VALUES: list[Any] = [
    2**62, 2**63 - 1, -(2**63), -1, 0, 1, NOW_MS * 1000, NOW_MS * 10**6, NOW_MS // 1000,
    NOW_MS + 60_000, MAX_BUDGET_MS + 1, float("nan"), float("inf"), -float("inf"), 1.5e300,
    1500.5, -0.0, "1e400", "NaN", "12 ", "0x10", "", "soon", True, [1, 2], ["a"],
]


def budget_value(rng: random.Random) -> Any:
    """A hostile value for a budget.* number: a notorious one, or a random int, float or
    numeric string of any magnitude."""
    choice = rng.randrange(5)
    if choice == 0:
        return rng.choice(NOTORIOUS_BUDGET_VALUES)
    if choice == 1:
        return rng.randrange(-(2**63), 2**63)
    if choice == 2:
        return rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 300)
    if choice == 3:
        return str(rng.randrange(-(10**30), 10**30))
    return rng.choice([0, 1, 1000, 30_000, NOW_MS]) * rng.choice([1, 1000, 10**6]) + rng.choice(
        [0, 0.5, -1])


def budget_body(spans: list[ReadableSpan], as_json: bool) -> FlatBatch:
    """The run through the receivers' own decoder: protobuf, or OTLP JSON."""
    message = request(spans)
    if as_json:
        return SpanIntake.decode_json(json.dumps(otlp_json(message)).encode(), "fuzz")
    return SpanIntake.decode_protobuf(message.SerializeToString(), "fuzz")


def budget_example(key: str, value: Any, as_json: bool, con: Any, start_ns: int) -> str:
    """The promise for budget.* numbers: the span is stored whatever the value; the typed
    column holds it within its bounds, or nothing with a counted reason naming the attribute;
    and deriving the run never fails (it overflowed on 2^62 ms before)."""
    from store import SpanWriter
    from store.testing import PendingDerivations, refresh_touched

    batch = budget_body(budget_run(key, value, start_ns), as_json)
    assert batch.span_count == 2, batch.rejections
    check_rejections(batch.rejections)
    column = TYPED_ATTRIBUTES[key][0]
    stored = batch.spans[column][1 if key in RUN_BUDGET_KEYS else 0]
    low, high = BUDGET_BOUNDS[key]
    assert stored is None or low <= stored <= high, (key, value, stored)
    if stored is None:
        assert any(key in r.message and r.reason.startswith("budget_")
                   for r in batch.rejections), (key, value, batch.rejections)
    SpanWriter(con).write(batch)
    PendingDerivations(refresh_touched).run(con)
    assert PendingDerivations.failed(con) == 0, con.execute(
        "SELECT error FROM derivation_failures").fetchall()
    trace_id = batch.spans["trace_id"][0]
    assert con.execute("SELECT count(*) FROM runs WHERE trace_id = ?",
                       [trace_id]).fetchone()[0] == 1
    return "kept" if stored is not None else "refused"


# ------------------------------------------------------------------ HTTP framing
_CHUNK_FORMS = ("{h}", "{h}", "0x{h}", "+{h}", "-{h}", "{h}_", " {h}", "{h} ", "{h}\t",
                "{h};ext=1", "0" * 70 + "{h}", "{H}", "")
# What a framing example may be answered: an answer, or a close without one (tornado closes on
# a chunk-size line or head past its bounds). A 500 or no answer within the watchdog fails.
FRAMING_STATUSES = {200, 400, 411, 413, 415, 503}


def framing_request(rng: random.Random, payload: bytes) -> tuple[bytes, bool]:
    """A raw POST /v1/traces of `payload` with random framing: chunk sizes in strict and
    hostile forms, a big or many-lined head, Content-Length right or wrong, gzip of many
    members. Returns (request, whether a correct server must refuse it)."""
    headers = [b"Host: fuzz", b"Content-Type: application/x-protobuf", b"Connection: close"]
    hostile = False
    body = payload
    if rng.random() < 0.3:  # gzip, of one or many members
        count = rng.choice([1, 2, 64, 65, 500])
        step = max(1, -(-len(payload) // count))
        body = b"".join(gzip.compress(payload[i:i + step], mtime=0)
                        for i in range(0, len(payload), step)) or gzip.compress(b"")
        hostile |= len(range(0, len(payload), step)) > 64
        headers.append(b"Content-Encoding: gzip")
    if rng.random() < 0.2:  # a big head: many headers, or one long value
        if rng.random() < 0.5:
            headers += [b"X-F%d: v" % index for index in range(rng.randrange(10, 3000))]
        else:
            headers.append(b"X-Long: " + b"a" * rng.randrange(1000, 100_000))
    framing = rng.random()
    if framing < 0.5:
        pieces = []
        position = 0
        while position < len(body):
            size = rng.randrange(1, 4096)
            piece = body[position:position + size]
            position += size
            form = rng.choice(_CHUNK_FORMS)
            digits = f"{len(piece):x}"
            line = form.format(h=digits, H=digits.upper())
            hostile |= form not in ("{h}", "{H}")
            pieces.append(line.encode() + b"\r\n" + piece + b"\r\n")
        headers.append(b"Transfer-Encoding: chunked")
        framed = b"".join(pieces) + b"0\r\n\r\n"
    else:
        length = len(body)
        if framing < 0.6:
            length = rng.choice([length + 10, -1, 2**64])
            hostile = True
        headers.append(b"Content-Length: %d" % length)
        framed = body
    head = b"POST /v1/traces HTTP/1.1\r\n" + b"\r\n".join(headers) + b"\r\n\r\n"
    return head + framed, hostile


def framing_example(port: int, rng: random.Random, payload: bytes) -> str:
    """One framing example against a receiver on 127.0.0.1:`port`: the answer's status (or
    'closed'); raises AssertionError for a 200 to a request a strict server must refuse, or
    an answer outside FRAMING_STATUSES."""
    import socket

    request, hostile = framing_request(rng, payload)
    with socket.create_connection(("127.0.0.1", port), timeout=8) as client:
        with contextlib.suppress(OSError):
            client.sendall(request)
            if hostile:  # a body shorter than announced ends here, instead of timing out
                client.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                answer += chunk
    if not answer:
        return "closed"
    status = int(answer.split(b" ", 2)[1])
    assert status in FRAMING_STATUSES, answer[:200]
    assert not (hostile and status == 200), f"accepted hostile framing: {request[:300]!r}"
    return str(status)
