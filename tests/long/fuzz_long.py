"""Long random fuzzing of every decoder: the checks of tests/ingest/test_fuzz_decoders.py, at
random, for as long as asked, and the budget.* numbers (`budget`: a hostile value on a random budget
attribute of a run made by the SDK, stored and derived in a real database), and the HTTP framing
(`http-framing`: chunk sizes strict and hostile, big heads, wrong lengths, gzip member counts, sent
raw to a real receiver on 127.0.0.1). Prints examples/s per target and every distinct failure with
the input that caused it (saved under --out), then exits non-zero if anything failed.

    .venv/bin/python -m tests.long.fuzz_long --seconds 600 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
import traceback
from pathlib import Path

from tests.support import fuzz_harness as fuzz

TARGETS = ("protobuf", "receiver-protobuf", "json", "json-fields", "file", "file-gzip",
           "gzip-corrupt", "bytes", "budget", "http-framing")


class FramingServer:
    """The receivers the `http-framing` target talks to (started before the examples, outside
    their watchdog: opening a database takes seconds on a loaded machine)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.receivers: object | None = None
        self.owner: object | None = None

    def start(self) -> None:
        from ingest.receivers.limits import Limits
        from ingest.receivers.service import ReceiverConfig, Receivers
        from store import DatabaseOwner

        self.owner = DatabaseOwner(self.folder / "framing.duckdb")
        self.receivers = Receivers(self.owner, ReceiverConfig(
            http_port=0, grpc_port=0, limits=Limits(max_body_bytes=1 << 20, body_timeout=5.0)))
        self.receivers.start()

    def example(self, rng: random.Random, payload: bytes) -> tuple[str, bytes]:
        port = self.receivers.http_port  # type: ignore[attr-defined]
        return fuzz.framing_example(port, rng, payload), payload

    def close(self) -> None:
        if self.receivers is not None:
            self.receivers.stop(10)  # type: ignore[attr-defined]
            self.owner.close()  # type: ignore[attr-defined]


class BudgetDatabase:
    """The database the `budget` target stores and derives its runs in (opened on first use)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.con: object | None = None
        self.runs = 0

    def example(self, rng: random.Random) -> tuple[str, bytes]:
        from store import connect
        from store.testing import BUDGET_NUMBER_KEYS

        if self.con is None:
            self.con = connect(self.folder / "budget.duckdb")
        key, value = rng.choice(BUDGET_NUMBER_KEYS), fuzz.budget_value(rng)
        as_json = rng.random() < 0.5
        self.runs += 1
        start_ns = time.time_ns() - 7 * 24 * 3600 * 10**9 + self.runs * 10**9
        data = repr((key, value, "json" if as_json else "protobuf")).encode()
        return fuzz.budget_example(key, value, as_json, self.con, start_ns), data


def one(target: str, seeds: dict[str, bytes], document: object, rng: random.Random,
        folder: Path, budgets: BudgetDatabase | None = None,
        framing: FramingServer | None = None) -> tuple[str, bytes]:
    if target == "budget":
        assert budgets is not None
        return budgets.example(rng)
    if target == "http-framing":
        assert framing is not None
        return framing.example(rng, seeds["protobuf"])
    rounds = rng.randrange(1, 7)
    if target == "protobuf":
        data = fuzz.mutate(seeds[rng.choice(["protobuf", "prefixed"])], rng, rounds)
        return fuzz.protobuf_body(data), data
    if target == "receiver-protobuf":
        data = fuzz.mutate(seeds[rng.choice(["protobuf", "prefixed"])], rng, rounds)
        return fuzz.receiver_protobuf_body(data), data
    if target == "json":
        data = fuzz.mutate(seeds[rng.choice(["json", "jsonl"])], rng, rounds)
        return fuzz.json_body(data), data
    if target == "json-fields":
        data = fuzz.mutate_json(document, rng, rng.randrange(1, 4))
        if rng.random() < 0.5:
            return fuzz.json_body(data), data
        return fuzz.file_pieces(data, folder), data
    if target == "file":
        data = fuzz.mutate(seeds[rng.choice(sorted(seeds))], rng, rounds)
        return fuzz.file_pieces(data, folder), data
    if target == "file-gzip":
        data = fuzz.gzipped(fuzz.mutate(seeds[rng.choice(sorted(seeds))], rng, rounds))
        return fuzz.file_pieces(data, folder), data
    if target == "gzip-corrupt":
        data = fuzz.mutate(fuzz.gzipped(seeds[rng.choice(sorted(seeds))]), rng, rounds)
        outcome = fuzz.gzip_body(data, fuzz.protobuf_body)
        return outcome + "/" + fuzz.file_pieces(data, folder), data
    data = rng.randbytes(rng.randrange(0, 512))
    return (fuzz.protobuf_body(data) + "/" + fuzz.receiver_protobuf_body(data) + "/"
            + fuzz.json_body(data)), data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--watchdog", type=float, default=10.0,
                        help="seconds one example may run before it counts as a hang")
    parser.add_argument("--out", type=Path, default=Path("bench/out/fuzz"))
    args = parser.parse_args()
    seeds = fuzz.seeds()
    document = json.loads(seeds["json"])
    rng = random.Random(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()
    spent: collections.Counter[str] = collections.Counter()
    failures: dict[str, tuple[str, bytes, str]] = {}
    failure_counts: collections.Counter[str] = collections.Counter()
    fuzz.receiver_protobuf_body(seeds["protobuf"])  # one-time set-ups, outside the rates
    fuzz.protobuf_body(seeds["protobuf"])
    started = time.monotonic()
    with fuzz.scratch_folder() as scratch:
        folder = Path(scratch)
        budgets = BudgetDatabase(folder)
        framing = FramingServer(folder)
        framing.start()
        while time.monotonic() - started < args.seconds:
            target = rng.choice(TARGETS)
            began = time.monotonic()
            data = b""
            try:
                with fuzz.watchdog(args.watchdog):
                    outcome, data = one(target, seeds, document, rng, folder, budgets,
                                        framing)
                outcomes[f"{target}: {outcome}"] += 1
            except Exception as error:  # noqa: BLE001 - every failure is reported
                key = f"{target}: {type(error).__name__}: {str(error)[:120]}"
                failure_counts[key] += 1
                failures.setdefault(key, (target, data, traceback.format_exc()))
            counts[target] += 1
            spent[target] += time.monotonic() - began
        framing.close()
    elapsed = time.monotonic() - started
    total = sum(counts.values())
    print(f"seed {args.seed}: {total:,} examples in {elapsed:.0f} s "
          f"({total / elapsed:,.0f} examples/s)")
    for target in TARGETS:
        if counts[target]:
            print(f"  {target:17} {counts[target]:8,} examples "
                  f"{counts[target] / max(spent[target], 1e-9):8,.0f}/s of its own time")
    print("outcomes:")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {outcome:40} {count:8,}")
    if not failures:
        print("failures: none")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"failures: {len(failures)} distinct")
    for index, (key, (_target, data, trace)) in enumerate(failures.items()):
        saved = args.out / f"failure-{args.seed}-{index}.bin"
        saved.write_bytes(data)
        print(f"--- ×{failure_counts[key]} {key}\n    input: {saved} ({len(data)} bytes)")
        print("    " + trace.strip().replace("\n", "\n    "))
    return 1


if __name__ == "__main__":
    sys.exit(main())
