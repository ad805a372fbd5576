"""When runs and steps are derived: every trigger of the derivation, and its pace, in one place.

What is derived is the same whatever starts it (the derivation SQL, statements.py), and so is
how: the marked traces in slices, a failing trace confined to itself (PendingDerivations).
What starts it:

1. `budgetscope serve`, after commits: the group-commit writer's derive thread, at most every
   DERIVE_EVERY_SECONDS, and once when it starts, for marks a previous process left;
2. serve, when a writer task marked traces (retention, a declared budget): request_derivation;
3. serve, when it stops: one last turn once the writer has drained;
4. bulk loads (`ingest`, `demo`): every DERIVE_EVERY_SPANS stored spans, and once at the end;
5. a command that opens the file read-write (`ingest`, `retain`, `budgets` changes), and a
   read command (`report`, `run`, `check`, `simulate`, `dashboard`) that finds marks and can
   open the file for writing at once (open_for_reading in store/read/reader.py; else it reads
   without them and says so): `catch_up`, for what a stopped or crashed writer left;
6. `budgetscope budgets` on the file: right after the change it stored (`derive_now`).

Every trigger derives the same way, so every trigger also re-measures: a change of a declared budget
(docs/guide.md#declaring-budgets) marks its traces in pending_measurements, and each turn measures
their stored runs and steps again (REMEASURE) after deriving the traces with new spans in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb

from store.derive.pending import PENDING_QUERIES, Derive, PendingDerivations, describe
from store.derive.statements import refresh_touched, remeasure_touched, set_root_cutoff
from store.prices.bundled import check_version

# The derivation every trigger runs (tests hand GroupCommitter another one to hold a turn open).
DERIVE: Derive = refresh_touched
# A change of a declared budget or cap moves only B: the traces it marked are measured again
# from their stored runs and steps, not derived from their spans (bench/bench_declared_budgets.py
# times it beside a full rebuild).
REMEASURE: Derive = remeasure_touched
# serve: a turn gathers the commits of this long, so the dashboard sees a new run within about
# a second while a burst of commits pays the derivation's fixed cost (~150 ms) once.
DERIVE_EVERY_SECONDS = 1.0
# docs/conventions.md, "A trace without its root": how long after its last span a trace whose root
# has not arrived is measured from its earliest span (serve's and ingest's --root-grace; ingest
# decides once its files are read). Five minutes: an agent's run ends its root last, within seconds
# of its last step; an exporter's batch and retries add seconds more, not minutes.
ROOT_GRACE_SECONDS = 300.0
# Bulk loads: often enough that a load's pending marks stay few, rarely enough that the
# derivation's fixed cost per run (~150 ms of statement set-up here) is spread over many batches.
DERIVE_EVERY_SPANS = 100_000


def pending_derivations(derive: Derive = DERIVE, paced: bool = False) -> PendingDerivations:
    """The derivation of the marked traces, as every trigger runs it (`derive`: a test's
    stand-in for DERIVE; the re-measure stays REMEASURE); `paced`: serve's derivation thread
    (trigger 1), where a large trace marked again and again waits its turn
    (PendingDerivations)."""
    return PendingDerivations(derive, remeasure=REMEASURE, paced=paced)


_MARK_ROOTLESS_DUE = PENDING_QUERIES["mark_rootless_due"].text


def measure_rootless(con: duckdb.DuckDBPyConnection, grace_seconds: float,
                     derivations: PendingDerivations | None = None) -> int:
    """docs/conventions.md, a trace without its root: the traces waiting for their root whose last
    span was stored more than `grace_seconds` ago are marked and derived now, each measured from its
    earliest span, with whatever else is marked (a trace marked by its last write is measured so
    too, when that write is already older). Returns how many waiting traces were marked. serve's
    derivation thread calls it every turn; `ingest` once its files are read."""
    cutoff = datetime.now(UTC) - timedelta(seconds=grace_seconds)
    marked = con.execute(_MARK_ROOTLESS_DUE, {"cutoff": cutoff}).fetchall()
    set_root_cutoff(con, cutoff)
    try:
        (derivations or pending_derivations()).run(con)
    finally:
        set_root_cutoff(con, None)
    return len(marked)


def rootless_due(con: duckdb.DuckDBPyConnection, grace_seconds: float) -> bool:
    """Whether some trace waits for its root longer than the grace period."""
    cutoff = datetime.now(UTC) - timedelta(seconds=grace_seconds)
    row = con.execute("SELECT EXISTS (SELECT 1 FROM traces_awaiting_root "
                      "WHERE last_received_at < ?)", [cutoff]).fetchone()
    return bool(row and row[0])


def rootless_counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(traces with spans but no run, waiting for their root; runs measured without it)."""
    row = con.execute("SELECT (SELECT count(*) FROM traces_awaiting_root), "
                      "(SELECT count(*) FROM runs WHERE root_missing)").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def derive_now(con: duckdb.DuckDBPyConnection) -> int:
    """Derive every marked trace now (trigger 6); returns how many were derived."""
    return pending_derivations().run(con)


@dataclass(frozen=True)
class CatchUp:
    """What `catch_up` could not do: traces left marked by an error of the environment (with
    that error), and traces recorded as failing to derive on their own."""

    left_marked: int = 0
    error: str | None = None
    traces_failed: int = 0


def catch_up(con: duckdb.DuckDBPyConnection) -> CatchUp:
    """Derive what a stopped or crashed writer left marked (trigger 5), so reports see every
    stored span. Never raises a derivation error: a trace that fails alone is recorded by
    PendingDerivations; an error of the environment leaves the traces marked for the next try,
    and both are returned for the caller to say."""
    check_version(con)  # a new bundled price table marks the runs it re-prices
    if not PendingDerivations.count(con):
        return CatchUp()
    derivations = pending_derivations()
    try:
        derivations.run(con)
    except duckdb.Error as error:
        return CatchUp(PendingDerivations.count(con), describe(error), derivations.traces_failed)
    return CatchUp(traces_failed=derivations.traces_failed)
