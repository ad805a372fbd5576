"""Committed spans/s before and after SPEC §9's conventions (issue 13), on the same payloads,
in one run.

    .venv/bin/python bench/bench_conventions_ingest.py [--baseline REV] [--spans 100000]
                                                       [--rounds 3] [--payloads receivers|genai]

The baseline is the code at REV (default: main just before the conventions landed), exported
with `git archive` into a temporary folder; each round runs the baseline and the current tree
in turn, each in a fresh process, on the same request bodies (written once to a file):
- write path: flatten_protobuf (the receivers' decode+flatten) of 4-request transactions and
  SpanWriter.write into a fresh file database (serve's checkpoint threshold), i.e. spans
  acknowledged per second of one writer;
- derive: the runs/steps derivation of the pending traces every 20 transactions, timed apart
  (serve runs it on its own connection beside the writer), and the two together.
Figures are medians over rounds, with the current/baseline ratio. Wall clock on a shared
2-core machine moves with the neighbours; the rounds alternate so both sides see the same.

Payloads: `receivers` are bench_receivers' (512-span requests of 32-span runs with the SPEC
budget.* attributes); `genai` are the same shape with the attributes instrumentations send
instead (GenAI, OpenInference, HTTP client spans), which the new rules read and recognise.
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

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "d481eb6"  # main before "ingest: type the attributes SPEC §9's ..."
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
             gen_ai__system="openai", gen_ai__usage__input_tokens=812),
        dict(openinference__span__kind="LLM", llm__model_name="gpt-4o",
             llm__invocation_parameters='{"model": "gpt-4o", "temperature": 0}'),
        dict(gen_ai__operation__name="execute_tool", gen_ai__tool__name="fetch_report"),
        dict(http__request__method="GET", server__address="api.internal",
             url__full="https://api.internal/v1/reports/7", http__response__status_code=503,
             error__type="503"),
        dict(openinference__span__kind="TOOL", tool__name="lookup",
             output__value="Tool 'lookup' timed out after 5 seconds."),
    ]
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
            root.attributes.extend(attrs(gen_ai__operation__name="invoke_agent",
                                         gen_ai__agent__name="support-agent"))
            parent = root_id
            for index in range(31):
                shape = shapes[index % len(shapes)]
                span_id = rng.randbytes(8)
                began = start + index * 10**9
                span = scope.spans.add(
                    trace_id=trace_id, span_id=span_id, parent_span_id=parent,
                    name=f"span {index % len(shapes)}", start_time_unix_nano=began,
                    end_time_unix_nano=began + 9 * 10**8, kind=3 if index % 5 == 3 else 1)
                span.attributes.extend(attrs(**shape))
                parent = span_id if index % 5 == 2 else root_id  # HTTP inside the tool
        payloads.append(request.SerializeToString())
    return payloads


def _from_tree(tree: Path, name: str, *modules: str) -> object:
    """`name` from the first of `modules` that is a file of `tree` and defines it."""
    import importlib
    import importlib.util

    for module in modules:
        if not (tree / module.split(".")[0]).is_dir():
            continue  # finding it would import the installed current tree's package
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            continue
        if spec is None or not spec.origin or not Path(spec.origin).is_relative_to(tree):
            continue
        loaded = importlib.import_module(module)
        if hasattr(loaded, name):
            return getattr(loaded, name)
    raise ImportError(f"{name} is in none of {modules} under {tree}")


def child(tree: Path, payload_file: Path) -> None:
    """One measurement, with the ingest and queries packages of `tree`."""
    sys.path.insert(0, str(tree))
    # Each name from the first module of `tree` that defines it: the store's front (the store in
    # rooms) first, then the flat store/ package before it, then the older homes. Revisions in
    # the middle of those moves have some of each; a name missing from `tree` must never come
    # from the installed current tree (the "baseline" would then measure the current code), so
    # each candidate is checked to be a file of `tree`.
    relax_gc_for_ingest = _from_tree(tree, "relax_gc_for_ingest",
                                     "budgetscope.gc_tuning", "ingest.gc_tuning")
    flatten_protobuf = _from_tree(tree, "flatten_protobuf",
                                  "ingest.decode.proto_flatten", "ingest.proto_flatten")
    connect = _from_tree(tree, "connect", "store", "store.database", "ingest.database")
    PendingDerivations = _from_tree(tree, "PendingDerivations",  # noqa: N806
                                    "store", "store.derivation", "ingest.derivation")
    refresh_touched = _from_tree(tree, "refresh_touched", "store", "store.derive",
                                 "queries.derive")
    CHECKPOINT_THRESHOLD = _from_tree(tree, "CHECKPOINT_THRESHOLD",  # noqa: N806
                                      "store", "store.owner", "ingest.owner")
    FlatBatch = _from_tree(tree, "FlatBatch",  # noqa: N806
                           "store", "store.rows", "ingest.flatten")
    SpanWriter = _from_tree(tree, "SpanWriter",  # noqa: N806
                            "store", "store.writer", "ingest.writer")

    relax_gc_for_ingest()
    payloads: list[bytes] = pickle.loads(payload_file.read_bytes())
    write_wall = derive_wall = write_cpu = derive_cpu = flatten_cpu = 0.0
    spans = 0
    with tempfile.TemporaryDirectory() as folder:
        # One untimed write and derivation into a scratch file first. What a process pays once
        # (importing pandas, which pyarrow and DuckDB load lazily at the first Arrow insert;
        # DuckDB's first-statement setup) is not ingest throughput, and it moved with the layout:
        # a revision whose imports happened to load pandas at start did not count it, one that
        # loads it at the first write counted ~1.5-2.5 s of it (issue 17's "write path x0.61").
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


def export_baseline(revision: str, into: Path) -> Path:
    # The packages the child imports, as that revision has them (store/ exists only since
    # issue 17; without it a baseline would take `store` from the installed current tree).
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", revision],
                            check=True, capture_output=True, text=True).stdout.split()
    packages = [name for name in ("budgetscope", "ingest", "queries", "store") if name in listed]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, *packages],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare")
    parser.add_argument("--baseline-tree", type=Path, help="a checked-out tree to compare "
                        "instead (e.g. this branch with the conventions commits reverted, so "
                        "that nobody else's changes since --baseline count)")
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--payloads", choices=("receivers", "genai"), default="receivers")
    parser.add_argument("--child", nargs=2, metavar=("TREE", "PAYLOADS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(Path(options.child[0]), Path(options.child[1]))
        return
    count = max(options.spans // SPANS_PER_REQUEST, 1)
    if options.payloads == "receivers":
        sys.path.insert(0, str(ROOT / "bench"))
        sys.path.insert(0, str(ROOT))
        from bench_receivers import make_payloads
        payloads = make_payloads(count, SPANS_PER_REQUEST)
    else:
        payloads = make_genai_payloads(count)
    results: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory() as folder:
        payload_file = Path(folder) / "payloads.pickle"
        payload_file.write_bytes(pickle.dumps(payloads))
        (Path(folder) / "baseline").mkdir()
        baseline = options.baseline_tree or export_baseline(options.baseline,
                                                            Path(folder) / "baseline")
        trees = {"baseline": baseline, "current": ROOT}
        for _ in range(options.rounds):
            for side, tree in trees.items():
                out = subprocess.run([sys.executable, __file__, "--child", str(tree),
                                      str(payload_file)], check=True, capture_output=True,
                                     text=True, cwd=folder).stdout
                results[side].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{count * SPANS_PER_REQUEST:,} spans ({options.payloads} payloads), "
          f"{options.rounds} alternating rounds, baseline "
          f"{options.baseline_tree or options.baseline} vs this tree; "
          "medians")
    steps = {side: results[side][0]["steps"] for side in results}
    print(f"  steps derived: baseline {steps['baseline']:,}, current {steps['current']:,}")
    for key, label in (("write_spans_per_s", "write path, committed spans/s"),
                       ("write_cpu_us", "write path, µs CPU per span"),
                       ("flatten_cpu_us", "  of which decode+flatten"),
                       ("derive_spans_per_s", "derivation, spans/s"),
                       ("derive_cpu_us", "derivation, µs CPU per span"),
                       ("both_spans_per_s", "write + derivation, spans/s")):
        base = statistics.median(r[key] for r in results["baseline"])
        now = statistics.median(r[key] for r in results["current"])
        print(f"  {label:32s} baseline {base:10,.1f}  current {now:10,.1f}  "
              f"ratio {now / base:5.3f}")


if __name__ == "__main__":
    main()
