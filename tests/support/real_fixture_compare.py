"""Ingest a real-library fixture the way a user would (`budgetscope ingest` into a DuckDB file)
and set what the derivation found beside the harness's ground truth. Shared by the fixture test
and the regeneration test."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.paths import REPO
from tests.support.run_cache import built_once_a_run

FIXTURES = REPO / "tests" / "real_fixtures"
RUNS_SQL = """
SELECT run_id, trace_id, agent, budget_ms, culprit_span_id, culprit_key, holder_span_id,
       holder_key
FROM runs ORDER BY start_ns, run_id
"""
STEPS_SQL = """
SELECT span_id, kind, name, class, is_top_level, side_effect
FROM steps WHERE run_id = ? ORDER BY start_ns, end_ns DESC, span_id
"""


def ingest(otlp: Path | Iterable[Path], db: Path) -> None:
    """`budgetscope ingest` of one trace file, or of several at once, into db."""
    paths = [otlp] if isinstance(otlp, Path) else list(otlp)
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", *map(str, paths)])
    assert result.exit_code == 0, result.output
    assert "0 rejected" in result.output, result.output


def ingested(name: str, factory: pytest.TempPathFactory) -> Path:
    """The fixture `name` ingested alone into a DuckDB file, once a run (tests/support/
    run_cache.py): the fixture tests only read it, and they ingested each fixture into a file of
    its own three times (ground truth, usage, conventions)."""
    return built_once_a_run(factory, f"real-fixture-{name}.duckdb",
                            lambda db: ingest(FIXTURES / "otlp" / f"{name}.otlp.pb", db))


def found_runs(db: Path) -> list[dict[str, Any]]:
    """Each run as the derivation stored it, in the shape of the ground truth's runs."""
    with duckdb.connect(str(db), read_only=True) as connection:
        runs = connection.execute(RUNS_SQL).fetchall()
        # runs.root_missing (docs/metrics.md §8, docs/conventions.md "a trace without its root") is
        # read only where the derivation already has the column: a derivation without it is compared
        # on the rest
        has_root_missing = bool(connection.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'runs' AND column_name = 'root_missing'").fetchone()[0])
        root_missing = dict(connection.execute(
            "SELECT run_id, root_missing FROM runs").fetchall()) if has_root_missing else {}
        found = []
        for run_id, trace_id, agent, budget_ms, culprit_id, culprit_key, holder_id, holder_key \
                in runs:
            steps = connection.execute(STEPS_SQL, [run_id]).fetchall()
            top = [row[0] for row in steps if row[4]]
            run = {
                "trace_id": trace_id, "agent": agent, "budget_ms": budget_ms,
                "steps": [{"kind": kind, "name": name, "class": cls, "top_level": is_top}
                          for _, kind, name, cls, is_top, _ in steps],
                "culprit": _pick(top, culprit_id, culprit_key),
                "holder": _pick(top, holder_id, holder_key),
                "declared_writes": [f"{kind}:{name}" for _, kind, name, _, _, effect in steps
                                    if effect == "write"],
            }
            if has_root_missing:
                run["root_missing"] = bool(root_missing[run_id])
            found.append(run)
    return found


def _pick(top: list[str], span_id: str | None, key: str | None) -> dict[str, Any] | None:
    if span_id is None:
        return None
    return {"index": top.index(span_id) if span_id in top else None, "key": key}


def expected_runs(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The ground truth in the same shape: what the derivation should find. root_missing only
    where the truth has it (the fixtures made since docs/conventions.md gave runs whose root never
    arrives)."""
    return [{
        **({"root_missing": run["root_missing"]} if "root_missing" in run else {}),
        "trace_id": run["trace_id"], "agent": run["agent"], "budget_ms": run["budget_ms"],
        "steps": [{"kind": step["kind"], "name": step["name"], "class": step["class"],
                   "top_level": step["top_level"]} for step in run["steps"]],
        "culprit": _truth_pick(run["culprit"]), "holder": _truth_pick(run["holder"]),
        "declared_writes": [f"{write['kind']}:{write['name']}" for write in run["writes"]
                            if write["declared"]],
    } for run in truth["runs"]]


def _truth_pick(chosen: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if chosen is None else {"index": chosen["index"], "key": chosen["key"]}


def differences(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[str]:
    """Every way the derivation disagrees with the truth, one readable line each."""
    return list(differences_by_place(found, expected).values())


def differences_by_place(found: list[dict[str, Any]],
                         expected: list[dict[str, Any]]) -> dict[tuple[int, str], str]:
    """The same, keyed by (run number, field). Runs are matched in start order. When the run
    counts differ, the harness's runs with a root of its own are matched by trace id and the
    others in start order with the runs left over: a run the derivation did not find is
    (number, "run"), runs it found that the harness did not make are (-1, "runs")."""
    if len(found) == len(expected):
        pairs: list[tuple[int, dict[str, Any] | None, dict[str, Any]]] = [
            (number, got, want)
            for number, (got, want) in enumerate(zip(found, expected, strict=True))]
        extra: list[dict[str, Any]] = []
    else:
        by_trace = {run["trace_id"]: run for run in found}
        rooted = {want["trace_id"] for want in expected if want["trace_id"] is not None}
        others = iter([run for run in found if run["trace_id"] not in rooted])
        pairs = [(number, by_trace.get(want["trace_id"]) if want["trace_id"] is not None
                  else next(others, None), want) for number, want in enumerate(expected)]
        extra = list(others)
    problems = {}
    if extra:
        problems[(-1, "runs")] = (f"{len(found)} runs found, the harness made {len(expected)}: "
                                  f"not the harness's {[run['trace_id'] for run in extra]}")
    for number, got, want in pairs:
        if got is None:
            problems[(number, "run")] = (
                f"run {number} ({want['trace_id'] or 'no root'}): not found as a run "
                f"({len(found)} runs found, the harness made {len(expected)})")
            continue
        if want["trace_id"] is None:  # a run with no root of the harness's own
            got = {**got, "trace_id": None}
        for field, value in want.items():
            if field not in got:  # root_missing, before the derivation stores it
                continue
            if got[field] != value:
                problems[(number, field)] = (
                    f"run {number} ({want['trace_id'] or 'no root'}) {field}: found "
                    f"{json.dumps(got[field])}, the harness says {json.dumps(value)}")
    return problems


def load_truth(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


# ---- usage (docs/metrics.md §11) ------------------------------------------------------------
# What the store derives per run (runs' token columns, and metered_spans) beside the fake model
# server's own billing log in the truth. Equal tokens per quantity means every call that told
# the client its usage is counted once: an aggregate (the Vercel AI SDK's outer span, a
# framework's total on an agent span) or the second span of one call added would show here.
USAGE_COLUMNS = {"tokens": "total", "input_tokens": "input", "cache_read_tokens": "cache_read",
                 "cache_write_tokens": "cache_write", "output_tokens": "output",
                 "reasoning_tokens": "reasoning"}
RUN_USAGE_SQL = """
SELECT run_id, trace_id, tokens, input_tokens, cache_read_tokens, cache_write_tokens,
       output_tokens, reasoning_tokens, unmetered_billable_steps, cost_nano
FROM runs ORDER BY start_ns, run_id
"""
METERED_SQL = "SELECT count(*) FROM metered_spans WHERE run_id = ? AND is_metered"


def has_usage(truth: dict[str, Any]) -> bool:
    """A fixture whose fake model billed anything (the truth's billing log per run)."""
    return any(run.get("usage", {}).get("calls") for run in truth["runs"])


def found_usage(db: Path) -> list[dict[str, Any]]:
    """Each run's usage as the store derived it, in start order, in the truth's shape."""
    with duckdb.connect(str(db), read_only=True) as connection:
        found = []
        for run_id, trace_id, *values in connection.execute(RUN_USAGE_SQL).fetchall():
            run = {"trace_id": trace_id, **dict(zip(
                [*USAGE_COLUMNS, "unmetered_billable_steps", "cost_nano"], values, strict=True))}
            run["metered_spans"] = connection.execute(METERED_SQL, [run_id]).fetchone()[0]
            found.append(run)
    return found


def expected_usage(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The fake's billing log per run in the same shape: the tokens it told the client (in
    §11.1's terms), one metered span per call that told it, one possibly billed unmetered model
    step per call billed without telling (a stream without include_usage, an answer to a client
    that had hung up), and those calls' cost at genai-prices' rates."""
    expected = []
    for run in truth["runs"]:
        usage = run["usage"]
        returned = usage["returned"]
        expected.append({
            "trace_id": run["trace_id"],
            **{column: returned[term] for column, term in USAGE_COLUMNS.items()},
            "unmetered_billable_steps": usage["unreturned_calls"],
            "metered_spans": sum(1 for call in usage["calls"] if call["returned"]),
            "cost_nano": usage["returned_usd_nano"],
        })
    return expected
