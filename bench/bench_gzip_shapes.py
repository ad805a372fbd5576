"""What the worst gzip body shapes cost the server, as ratios against a normal body in this run.

    .venv/bin/python bench/bench_gzip_shapes.py [--limit-mib 64] [--baseline-tree DIR]

A request body's server-side work before its commit is: inflate (gzip) under the body limit,
then decode and flatten to rows (the decode slot, ingest/receivers/span_intake.py). Each shape below
goes through exactly that (gunzip_limited + flatten_protobuf, as POST /v1/traces runs them),
timed in CPU seconds of this thread; the commit is left out (it costs per stored span, the same
for every shape). Printed per shape: wire bytes, inflated bytes, the outcome, CPU, and the CPU
per wire byte and per inflated byte as ratios against the normal gzip body (a 512-span request,
as bench_receivers sends). With --baseline-tree, the old gunzip_limited (loaded from that
checkout) inflates the same bodies too. Then `budgetscope ingest`'s reader of gzip files
(ingest/files/sources.py GunzipReader, unchanged: each member costs it at most one 64 KiB copy) on a
file of many members, against a one-member file.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_receivers import make_payloads  # noqa: E402
from ingest.decode.proto_flatten import flatten_protobuf  # noqa: E402
from ingest.files.sources import GunzipReader  # noqa: E402
from ingest.receivers.limits import BadBody, BodyTooLarge, gunzip_limited  # noqa: E402

Inflate = Callable[[bytes, int], bytes]


def _members(data: bytes, count: int) -> bytes:
    step = max(1, -(-len(data) // count))
    return b"".join(gzip.compress(data[i:i + step], mtime=0) for i in range(0, len(data), step))


def _zeros_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([compressor.compress(block) for _ in range(size >> 20)]
                    + [compressor.flush()])


def _small_span_repeated(size: int) -> bytes:
    """ResourceSpans entries of one small span, the same bytes again and again: the most
    compressible body that is all real work (each entry is decoded and flattened)."""
    one = make_payloads(1, 1)[0]
    return one * (size // len(one))


def shapes(limit: int) -> dict[str, bytes]:
    normal = make_payloads(1, 512)[0]
    repeated = normal * max(1, (limit // 2) // len(normal))  # the same spans again and again
    return {
        "normal: 512-span request, gzip": gzip.compress(normal, mtime=0),
        "4,000 small members (issue 14)": _members(normal, 4000),
        "64 members (the cap)": _members(normal, 64),
        "empty members up to 1 MiB": gzip.compress(b"", mtime=0) * ((1 << 20) // 20),
        "4,000 members of 16 KiB of zeros each": gzip.compress(bytes(16 << 10), 9, mtime=0)
        * 4000,
        "64 members of 1 MiB of zeros each": gzip.compress(bytes(1 << 20), 9, mtime=0) * 64,
        "one small span repeated to 4 MiB": gzip.compress(_small_span_repeated(4 << 20), 9,
                                                          mtime=0),
        "bomb: zeros, 1,000:1, past the limit": _zeros_bomb(4 * limit),
        "valid spans repeated to half the limit": gzip.compress(repeated, 9, mtime=0),
    }


def cost(body: bytes, limit: int, inflate: Inflate, decode: bool = True
         ) -> tuple[float, int, str]:
    """(CPU seconds, inflated bytes, outcome) of one body through inflate + decode."""
    began = time.thread_time()
    inflated = 0
    try:
        data = inflate(body, limit)
        inflated = len(data)
        outcome = "inflated"
        if decode:
            try:
                outcome = f"{flatten_protobuf(data, '').span_count:,} spans decoded"
            except Exception as error:  # noqa: BLE001 - refused bodies are an outcome too
                outcome = f"400 {type(error).__name__}"
    except BodyTooLarge:
        outcome = "413 over the limit"
    except BadBody as error:
        outcome = f"400 {str(error)[:48]}"
    return time.thread_time() - began, inflated, outcome


def _load_baseline(tree: Path) -> Inflate:
    spec = importlib.util.spec_from_file_location(
        "baseline_limits", tree / "ingest/receivers/limits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_limits"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    baseline: Inflate = module.gunzip_limited

    def inflate(body: bytes, limit: int) -> bytes:
        try:
            return baseline(body, limit)
        except module.BodyTooLarge:
            raise BodyTooLarge(limit) from None
        except module.BadBody as error:
            raise BadBody(str(error)) from None
    return inflate


def read_file_reader(blob: bytes, reader: type) -> tuple[float, int]:
    began = time.thread_time()
    stream = reader(io.BytesIO(blob))
    buffer = bytearray(1 << 16)
    total = 0
    while count := stream.readinto(buffer):
        total += count
    return time.thread_time() - began, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-mib", type=int, default=64, help="--max-body-bytes, MiB")
    parser.add_argument("--baseline-tree", type=Path, default=None,
                        help="also inflate with gunzip_limited of this checkout")
    options = parser.parse_args()
    limit = options.limit_mib << 20
    bodies = shapes(limit)
    baseline = _load_baseline(options.baseline_tree) if options.baseline_tree else None

    results = {name: cost(body, limit, gunzip_limited) for name, body in bodies.items()}
    normal_name = next(iter(bodies))
    normal_cpu, normal_inflated, _ = results[normal_name]
    per_wire = normal_cpu / len(bodies[normal_name])
    per_inflated = normal_cpu / normal_inflated
    print(f"body limit {options.limit_mib} MiB; inflate (gunzip_limited) + decode "
          "(flatten_protobuf), CPU of one thread; ratios against the first line")
    for name, body in bodies.items():
        cpu, inflated, outcome = results[name]
        wire_ratio = cpu / len(body) / per_wire
        inflated_ratio = cpu / inflated / per_inflated if inflated else float("nan")
        print(f"  {name:42} {len(body):>11,} B wire {inflated:>11,} B inflated "
              f"{cpu * 1000:8.1f} ms  x{wire_ratio:7.2f} per wire byte "
              f"x{inflated_ratio:6.2f} per inflated byte  ({outcome})")
    if baseline is not None:
        print(f"inflate alone, this tree against {options.baseline_tree} (same bodies):")
        for name, body in bodies.items():
            new_cpu, _, new_outcome = cost(body, limit, gunzip_limited, decode=False)
            old_cpu, _, old_outcome = cost(body, limit, baseline, decode=False)
            print(f"  {name:42} {old_cpu * 1000:9.1f} ms -> {new_cpu * 1000:7.1f} ms  "
                  f"({old_outcome} -> {new_outcome})")

    normal_file = b"".join(make_payloads(200, 512))
    one = gzip.compress(normal_file, mtime=0)
    many = _members(normal_file, len(normal_file) // 40)  # members of 40 bytes
    one_cpu, size = read_file_reader(one, GunzipReader)
    many_cpu, many_size = read_file_reader(many, GunzipReader)
    assert size == many_size == len(normal_file)
    print(f"ingest's gzip file reader, {len(normal_file) / 1e6:.0f} MB inflated: one member "
          f"{one_cpu * 1000:.0f} ms; {len(normal_file) // 40:,} members of 40 bytes "
          f"{many_cpu * 1000:.0f} ms (x{many_cpu / len(many) / (one_cpu / len(one)):.2f} per "
          "wire byte)")


if __name__ == "__main__":
    main()
