"""Committed spans/s of the write path and the derivation, on receivers-shaped or
instrumentation-shaped payloads (written first for the conventions of docs/conventions.md).

    .venv/bin/python -m bench.bench_conventions_ingest [--spans 100000] [--rounds 3]
                                                      [--payloads receivers|genai|strays]

Each round runs in a fresh process, on the same request bodies (written once to a file):
- write path: flatten_protobuf (the receivers' decode+flatten) of 4-request transactions and
  SpanWriter.write into a fresh file database (serve's checkpoint threshold), i.e. spans
  acknowledged per second of one writer;
- derive: the runs/steps derivation of the pending traces every 20 transactions, timed apart
  (serve runs it on its own connection beside the writer), and the two together.
Figures are medians over rounds. Against another revision, in one run (the rounds of both
alternate, so both see the same neighbours on a shared machine): `python -m bench.ab --base
REV -- bench.bench_conventions_ingest` (bench/ab.py).

Payloads: `receivers` are bench_receivers' (512-span requests of 32-span runs with the budget.*
attributes of docs/metrics.md §2); `genai` are the same shape with the attributes instrumentations
send instead (GenAI, OpenInference, HTTP client spans), which the new rules read and recognise, and
with the usage their model calls report (docs/metrics.md §11: tokens with cache reads and reasoning
on every model call, the framework's total on the agent span), which the cost derivation meters and
prices; `strays` are runs whose HTTP client spans each come as a trace of their own (half the
spans: docs/conventions.md, "HTTP client spans in a trace of their own"), each inside one tool
call of its run.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect

try:
    from store.testing import CHECKPOINT_THRESHOLD, PendingDerivations, refresh_touched
except ImportError:
    # bench.ab copies this bench over a base revision from before store.testing (c0b92e3),
    # e.g. 9ef0c19, the one before tokens and dollars that issue 43 measures against, where
    # the same names were the front's own (read off the module: on this tree they are not)
    import store as base_front

    CHECKPOINT_THRESHOLD = base_front.CHECKPOINT_THRESHOLD  # type: ignore[attr-defined]
    PendingDerivations = base_front.PendingDerivations  # type: ignore[attr-defined]
    refresh_touched = base_front.refresh_touched  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parent.parent
SPANS_PER_REQUEST = 512
REQUESTS_PER_TRANSACTION = 4
DERIVE_EVERY = 20


def make_genai_payloads(count: int) -> list[bytes]:
    """Requests of 32-span runs as instrumentation libraries write them: an agent root, model
    calls (GenAI, OpenInference), tools with an HTTP client span inside, plain HTTP calls."""
    import random

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    rng = random.Random(13)
    now = time.time_ns() - 3600 * 10**9

    def attrs(**values: object) -> list[KeyValue]:
        out = []
        for key, value in values.items():
            any_value = AnyValue(int_value=value) if isinstance(value, int) else \
                AnyValue(string_value=str(value))
            out.append(KeyValue(key=key.replace("__", "."), value=any_value))
        return out

    shapes = [
        dict(gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o-mini",
             gen_ai__system="openai"),
        dict(openinference__span__kind="LLM", llm__model_name="gpt-4o",
             llm__invocation_parameters='{"model": "gpt-4o", "temperature": 0}'),
        dict(gen_ai__operation__name="execute_tool", gen_ai__tool__name="fetch_report"),
        dict(http__request__method="GET", server__address="api.internal",
             url__full="https://api.internal/v1/reports/7", http__response__status_code=503,
             error__type="503"),
        dict(openinference__span__kind="TOOL", tool__name="lookup",
             output__value="Tool 'lookup' timed out after 5 seconds."),
    ]
    def usage(shape: int) -> dict[str, int]:
        """What the model calls report (docs/metrics.md §11.1): OTel GenAI with cache reads on
        long conversations and some reasoning; OpenInference's token counts."""
        if shape == 0:
            prompt = rng.randrange(500, 60_000)
            return dict(gen_ai__usage__input_tokens=prompt,
                        gen_ai__usage__cache_read__input_tokens=prompt * rng.randrange(8) // 10,
                        gen_ai__usage__output_tokens=rng.randrange(20, 2_000),
                        gen_ai__usage__reasoning__output_tokens=rng.randrange(2) * 300)
        if shape == 1:
            prompt, completion = rng.randrange(500, 30_000), rng.randrange(20, 1_500)
            return dict(llm__token_count__prompt=prompt, llm__token_count__completion=completion,
                        llm__token_count__total=prompt + completion)
        return {}

    payloads = []
    for _ in range(count):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        resource.resource.attributes.extend(attrs(service__name="agent-svc"))
        scope = resource.scope_spans.add()
        for _trace in range(SPANS_PER_REQUEST // 32):
            trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
            start = now + rng.randrange(10**12)
            root = scope.spans.add(trace_id=trace_id, span_id=root_id, name="invoke_agent",
                                   start_time_unix_nano=start,
                                   end_time_unix_nano=start + 30 * 10**9)
            # the framework's total on the agent span (an aggregate, never counted)
            root.attributes.extend(attrs(gen_ai__operation__name="invoke_agent",
                                         gen_ai__agent__name="support-agent",
                                         gen_ai__usage__input_tokens=rng.randrange(10**5, 10**6),
                                         gen_ai__usage__output_tokens=rng.randrange(10**4)))
            parent = root_id
            for index in range(31):
                shape = shapes[index % len(shapes)]
                span_id = rng.randbytes(8)
                began = start + index * 10**9
                span = scope.spans.add(
                    trace_id=trace_id, span_id=span_id, parent_span_id=parent,
                    name=f"span {index % len(shapes)}", start_time_unix_nano=began,
                    end_time_unix_nano=began + 9 * 10**8, kind=3 if index % 5 == 3 else 1)
                span.attributes.extend(attrs(**shape, **usage(index % len(shapes))))
                parent = span_id if index % 5 == 2 else root_id  # HTTP inside the tool
        payloads.append(request.SerializeToString())
    return payloads




def make_stray_payloads(count: int) -> list[bytes]:
    """Requests of 16-span runs (an agent root, model calls, eight tool calls) and 16 one-span
    HTTP traces beside each run, two inside each of its tool calls, all of one service: half
    the spans arrive as traces of their own."""
    import random

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    rng = random.Random(17)
    now = time.time_ns() - 7 * 86400 * 10**9  # a week back: 17 s a run, one after another

    def attrs(**values: object) -> list[KeyValue]:
        return [KeyValue(key=key.replace("__", "."),
                         value=AnyValue(int_value=value) if isinstance(value, int)
                         else AnyValue(string_value=str(value)))
                for key, value in values.items()]

    model = dict(openinference__span__kind="LLM", llm__model_name="gpt-4o")
    tool = dict(openinference__span__kind="TOOL", tool__name="fetch_report")
    http = dict(http__request__method="GET", server__address="api.internal",
                http__response__status_code=503)
    payloads = []
    runs = 0
    for _ in range(count):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        resource.resource.attributes.extend(attrs(service__name="stray-svc"))
        scope = resource.scope_spans.add()
        for _trace in range(SPANS_PER_REQUEST // 32):
            trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
            # one run after another, as one worker's: each stray lies inside exactly one call
            # and joins it (runs overlapping at random, as this payload first had them, held
            # each stray in ~17 calls of ~20 concurrent runs: every stray stayed a run)
            start = now + runs * 17 * 10**9
            runs += 1
            root = scope.spans.add(trace_id=trace_id, span_id=root_id, name="agent run",
                                   start_time_unix_nano=start,
                                   end_time_unix_nano=start + 16 * 10**9)
            root.attributes.extend(attrs(budget__total_ms=20_000))
            for index in range(15):
                began = start + index * 10**9
                span = scope.spans.add(
                    trace_id=trace_id, span_id=rng.randbytes(8), parent_span_id=root_id,
                    name="tool" if index % 2 else "llm", start_time_unix_nano=began,
                    end_time_unix_nano=began + 9 * 10**8)
                span.attributes.extend(attrs(**(tool if index % 2 else model)))
                if index % 2 == 0 and index < 14:
                    continue
                for offset in ((1, 4), (5, 8)) if index % 2 else ((1, 4),):
                    stray = scope.spans.add(
                        trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name="GET",
                        start_time_unix_nano=began + offset[0] * 10**8,
                        end_time_unix_nano=began + offset[1] * 10**8, kind=3)
                    stray.attributes.extend(attrs(**http))
        payloads.append(request.SerializeToString())
    return payloads


def child(payload_file: Path) -> None:
    """One measurement, printed as a JSON line."""
    relax_gc_for_ingest()
    payloads: list[bytes] = pickle.loads(payload_file.read_bytes())
    write_wall = derive_wall = write_cpu = derive_cpu = flatten_cpu = 0.0
    spans = 0
    with tempfile.TemporaryDirectory() as folder:
        # One untimed write and derivation into a scratch file first. What a process pays once
        # (importing pandas, which pyarrow and DuckDB load lazily at the first Arrow insert;
        # DuckDB's first-statement setup) is not ingest throughput, and it moved with the layout:
        # a revision whose imports happened to load pandas at start did not count it, one that
        # loads it at the first write counted ~1.5-2.5 s of it (a "write path x0.61" once).
        warm = connect(Path(folder) / "warm-up.duckdb")
        warm_batch = FlatBatch()
        for body in payloads[:REQUESTS_PER_TRANSACTION]:
            warm_batch.extend(flatten_protobuf(body))
        SpanWriter(warm).write(warm_batch)
        PendingDerivations(refresh_touched).run(warm)
        warm.close()
        con = connect(Path(folder) / "bench.duckdb")
        con.execute("SET checkpoint_threshold = ?", [CHECKPOINT_THRESHOLD])
        writer, pending = SpanWriter(con), PendingDerivations(refresh_touched)
        for number, first in enumerate(range(0, len(payloads), REQUESTS_PER_TRANSACTION), 1):
            wall, cpu = time.perf_counter(), time.process_time()
            batch = FlatBatch()
            for body in payloads[first:first + REQUESTS_PER_TRANSACTION]:
                batch.extend(flatten_protobuf(body))
            flatten_cpu += time.process_time() - cpu
            spans += writer.write(batch).inserted
            write_wall += time.perf_counter() - wall
            write_cpu += time.process_time() - cpu
            if number % DERIVE_EVERY == 0 or first + REQUESTS_PER_TRANSACTION >= len(payloads):
                wall, cpu = time.perf_counter(), time.process_time()
                pending.run(con)
                derive_wall += time.perf_counter() - wall
                derive_cpu += time.process_time() - cpu
        steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
        con.close()
    print(json.dumps({"spans": spans, "steps": steps,
                      "write_spans_per_s": spans / write_wall,
                      "write_cpu_us": write_cpu / spans * 1e6,
                      "flatten_cpu_us": flatten_cpu / spans * 1e6,
                      "derive_spans_per_s": spans / derive_wall,
                      "derive_cpu_us": derive_cpu / spans * 1e6,
                      "both_spans_per_s": spans / (write_wall + derive_wall)}))




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--payloads", choices=("receivers", "genai", "strays"),
                        default="receivers")
    parser.add_argument("--child", type=Path, metavar="PAYLOADS", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child)
        return
    count = max(options.spans // SPANS_PER_REQUEST, 1)
    if options.payloads == "receivers":
        from bench.bench_receivers import make_payloads
        payloads = make_payloads(count, SPANS_PER_REQUEST)
    elif options.payloads == "strays":
        payloads = make_stray_payloads(count)
    else:
        payloads = make_genai_payloads(count)
    results: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        payload_file = Path(folder) / "payloads.pickle"
        payload_file.write_bytes(pickle.dumps(payloads))
        for _ in range(options.rounds):
            out = subprocess.run([sys.executable, "-m", "bench.bench_conventions_ingest",
                                  "--child", str(payload_file)], check=True,
                                 capture_output=True, text=True, cwd=ROOT).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{count * SPANS_PER_REQUEST:,} spans ({options.payloads} payloads), "
          f"{options.rounds} rounds; medians")
    print(f"  steps derived: {results[0]['steps']:,}")
    for key, label in (("write_spans_per_s", "write path, committed spans/s"),
                       ("write_cpu_us", "write path, µs CPU per span"),
                       ("flatten_cpu_us", "  of which decode+flatten"),
                       ("derive_spans_per_s", "derivation, spans/s"),
                       ("derive_cpu_us", "derivation, µs CPU per span"),
                       ("both_spans_per_s", "write + derivation, spans/s")):
        print(f"  {label:32s} {statistics.median(r[key] for r in results):10,.1f}")


if __name__ == "__main__":
    main()
