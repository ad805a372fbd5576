"""Declared budgets and prices inside `budgetscope serve`: changes go through the single writer,
and the answer waits for the derivation turn that re-measures the affected runs.

While serve holds the file nobody else can open it, so the server carries out `budgetscope
budgets` and `budgetscope prices` for the CLI (budgetscope/server/budgets_endpoint.py,
prices_endpoint.py) and budgets for the dashboard it runs (which is handed this service in its
configuration: dashboard.config's `editor`).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from store.declared import budgets as declared_budgets
from store.declared.budgets import Applied, Change, Declaration
from store.file.owner import DatabaseOwner
from store.prices import overrides as price_overrides
from store.prices.overrides import PriceApplied, PriceChange
from store.write.group_commit import GroupCommitter

# How long a change waits for its runs to be re-derived before answering "still deriving".
DERIVE_WAIT_SECONDS = 60.0
# How long a change waits for the writer to store it (a retention slice or a commit first).
WRITER_WAIT_SECONDS = 60.0


class WriterBusy(RuntimeError):
    """The writer did not store the change in time (it may still)."""


@dataclass(frozen=True)
class Outcome:
    """A stored change, and whether its runs were re-derived before the answer."""

    applied: Applied
    derived: bool
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {**self.applied.to_json(), "derived": self.derived,
                "seconds": round(self.seconds, 3)}


class _OnTheWriter:
    """A declaration's change stored by serve's single writer, answered once the runs it
    marked are re-measured (or the wait gave up)."""

    def __init__(self, owner: DatabaseOwner, committer: GroupCommitter, *,
                 derive_wait_seconds: float = DERIVE_WAIT_SECONDS) -> None:
        self.owner = owner
        self.committer = committer
        self.derive_wait_seconds = derive_wait_seconds

    def _store(self, apply: Callable[[Any], Any]) -> tuple[Any, bool, float]:
        """(what `apply(con)` on the writer returned, whether its runs were re-measured in
        time, seconds). Raises group_commit.Closed and WriterBusy."""
        started = time.monotonic()

        def task(con):  # type: ignore[no-untyped-def] - the writer's DuckDB connection
            return apply(con), self.committer.derivation_ticket()

        try:
            applied, ticket = self.committer.run_in_writer(task).result(WRITER_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            # Still queued or running on the writer: it will be stored, or fail, on its own.
            raise WriterBusy(f"the writer did not take the change within "
                             f"{WRITER_WAIT_SECONDS:g} s (it is still queued); list the "
                             "declarations in a moment to see it") from None
        derived = True
        if applied.traces:
            self.committer.request_derivation()
            derived = self.committer.wait_for_derivation(ticket, self.derive_wait_seconds)
        return applied, derived, time.monotonic() - started

    def _read(self, read: Callable[[Any], Any]) -> Any:
        cursor = self.owner.cursor()
        try:
            return read(cursor)
        finally:
            cursor.close()


class DeclaredBudgets(_OnTheWriter):
    def apply(self, change: Change) -> Outcome:
        """Store a change on the writer and wait for its re-derivation. Raises
        DeclarationError (bad input, nothing stored), group_commit.Closed and WriterBusy."""
        change = change.checked()
        applied, derived, seconds = self._store(
            lambda con: declared_budgets.apply(con, change))
        return Outcome(applied, derived, seconds)

    def declarations(self) -> list[Declaration]:
        return self._read(declared_budgets.declarations)


@dataclass(frozen=True)
class PriceOutcome:
    """A stored price change, and whether its runs were re-measured before the answer."""

    applied: PriceApplied
    derived: bool
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {**self.applied.to_json(), "derived": self.derived,
                "seconds": round(self.seconds, 3)}


class DeclaredPrices(_OnTheWriter):
    """`budgetscope prices` carried out by serve (docs/metrics.md §11.3, §11.8)."""

    def apply(self, change: PriceChange) -> PriceOutcome:
        """Store a price change on the writer and wait for its runs to be re-measured.
        Raises PriceError (bad input, nothing stored), group_commit.Closed and WriterBusy."""
        change = change.checked()
        applied, derived, seconds = self._store(lambda con: price_overrides.apply(con, change))
        return PriceOutcome(applied, derived, seconds)

    def listing(self) -> dict[str, Any]:
        """The prices set, the bundled table, and the models seen without a price."""
        return self._read(price_overrides.listing)
