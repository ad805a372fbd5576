"""The derivation's fixed cost: CPU per turn of a small turn (one run of a few spans), into a
file that already holds some thousands of derived spans, statement by statement.

    .venv/bin/python -m bench.bench_small_turn [--stored 4096] [--turns 30] [--sizes 5 50]
                                               [--top 12]

`budgetscope serve` derives every small batch it acknowledges, and every test that ingests
derives a few spans: what a turn costs whatever it holds is paid there, not the µs per span of
the bulk benchmarks. The file first gets `--stored` spans of bench_conventions_ingest's GenAI
payloads, derived. Then, for each size and each shape, `--turns` turns each write one new run
of that many spans (one SpanWriter.write) and derive it (PendingDerivations.run, as serve's
thread): the CPU of the run, in all and in each statement of store/derive/statements.py
(bench_derivation_statements' harness), the first turn of each kind left out as a warm-up.

Shapes: `plain` runs carry no usage (a root with budget.total_ms, budget.* steps, tool calls,
HTTP calls inside them), `usage` runs have GenAI model calls that report tokens (docs/metrics.md
§11), which the cost statements meter and price, `bare` runs neither a budget nor usage (GenAI
model calls without tokens: what an instrumented agent sends before any budget is declared).

Printed, for each shape and size: the median CPU ms of a turn and of its statements, each
file's statements' medians summed, then the `--top` statements by median CPU ms per turn (their
order differs between revisions: give `--top 0` to bench/ab.py, which pairs lines by their
words, and run each side alone for the statements). Against another revision in one run:
`python -m bench.ab --base main --rounds 3 --ranges -- bench.bench_small_turn`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_conventions_ingest import make_genai_payloads
from bench.bench_derivation_statements import SPENT, time_each_statement
from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect
from store.testing import CHECKPOINT_THRESHOLD, PendingDerivations, refresh_touched

SHAPES = ("plain", "usage", "bare")


def one_run(rng: random.Random, spans: int, shape: str) -> bytes:
    """A request of one run of `spans` spans: an agent root and its calls, in turn a model call,
    a tool call and an HTTP client call inside the tool."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def attrs(**values: object) -> list[KeyValue]:
        return [KeyValue(key=key.replace("__", "."),
                         value=AnyValue(int_value=value) if isinstance(value, int)
                         else AnyValue(string_value=str(value)))
                for key, value in values.items()]

    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.extend(attrs(service__name="small-svc"))
    scope = resource.scope_spans.add()
    trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
    start = time.time_ns() - 600 * 10**9
    root = scope.spans.add(trace_id=trace_id, span_id=root_id, name="agent run",
                           start_time_unix_nano=start,
                           end_time_unix_nano=start + spans * 10**9)
    budget = {} if shape == "bare" else {"budget__total_ms": spans * 2_000}
    root.attributes.extend(attrs(**budget, gen_ai__operation__name="invoke_agent",
                                 gen_ai__agent__name="small-agent"))
    parent = root_id
    for index in range(spans - 1):
        began = start + index * 10**9
        span_id = rng.randbytes(8)
        kind = index % 3
        if kind == 0 and shape == "usage":
            values = dict(gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o-mini",
                          gen_ai__system="openai",
                          gen_ai__usage__input_tokens=rng.randrange(500, 6_000),
                          gen_ai__usage__output_tokens=rng.randrange(20, 500))
        elif kind == 0 and shape == "bare":
            values = dict(gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o-mini",
                          gen_ai__system="openai")
        elif kind == 0:
            values = dict(budget__step="llm", budget__step_budget_ms=1_500)
        elif kind == 1:
            values = dict(gen_ai__operation__name="execute_tool", gen_ai__tool__name="lookup")
        else:
            values = dict(http__request__method="GET", server__address="api.internal",
                          http__response__status_code=200)
        span = scope.spans.add(trace_id=trace_id, span_id=span_id, parent_span_id=parent,
                               name=f"call {kind}", start_time_unix_nano=began,
                               end_time_unix_nano=began + 9 * 10**8, kind=3 if kind == 2 else 1)
        span.attributes.extend(attrs(**values))
        parent = span_id if kind == 1 else root_id  # the HTTP call inside the tool
    return request.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=4096)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--top", type=int, default=12)
    options = parser.parse_args()
    relax_gc_for_ingest()
    rng = random.Random(23)
    time_each_statement()
    with tempfile.TemporaryDirectory() as folder:
        con = connect(Path(folder) / "bench.duckdb")
        con.execute("SET checkpoint_threshold = ?", [CHECKPOINT_THRESHOLD])
        writer, pending = SpanWriter(con), PendingDerivations(refresh_touched, paced=True)
        stored = 0
        for body in make_genai_payloads(max(options.stored // 512, 1)):
            batch = FlatBatch()
            batch.extend(flatten_protobuf(body))
            stored += writer.write(batch).inserted
        pending.run(con)
        print(f"{stored:,} spans stored and derived first")
        for shape in options.shapes:
            for size in options.sizes:
                turns: list[float] = []
                each: dict[tuple[str, int], list[float]] = {}
                for turn in range(options.turns + 1):
                    batch = FlatBatch()
                    batch.extend(flatten_protobuf(one_run(rng, size, shape)))
                    writer.write(batch)
                    SPENT.clear()
                    cpu = time.process_time()
                    pending.run(con)
                    spent = time.process_time() - cpu
                    if turn == 0:  # the warm-up of this kind
                        continue
                    turns.append(spent)
                    for key, (_, seconds, _) in SPENT.items():
                        each.setdefault(key, []).append(seconds)
                median = {key: statistics.median(values + [0.0] * (len(turns) - len(values)))
                          for key, values in each.items()}
                print(f"{shape} runs of {size} spans, ms CPU per turn "
                      f"{statistics.median(turns) * 1e3:7.1f}")
                print(f"  {shape} {size}: in statements, ms per turn "
                      f"{sum(median.values()) * 1e3:7.1f}, statements run "
                      f"{len(median)}")
                files: dict[str, float] = {}
                for (name, _), seconds in median.items():
                    files[name] = files.get(name, 0.0) + seconds
                for name in sorted(files):  # a fixed order, which bench/ab.py pairs
                    print(f"  {shape} {size}: file {name} ms {files[name] * 1e3:6.2f}")
                for (name, rank), seconds in sorted(median.items(),
                                                    key=lambda item: -item[1])[:options.top]:
                    print(f"  {shape} {size}: {name}#{rank} ms {seconds * 1e3:6.2f}")
        con.close()


if __name__ == "__main__":
    main()
