"""Writer tasks and derivation turns take turns on the derived tables.

Writer tasks (retention, declared budgets; GroupCommitter.run_in_writer) and the derivation
both rewrite runs, steps and the marks of the same traces, which DuckDB would refuse as a write
conflict between the writer's connection and the derive thread's: so each holds one lock while
it runs. Turns are numbered, so that a writer task that marked traces can wait for the turn that
derives them (declared budgets: `ticket` inside the task, `wait` after it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class DerivedTableTurns:
    def __init__(self) -> None:
        self._derived_tables = threading.Lock()
        # Derivation turns begun (counted under _derived_tables) and finished without error.
        self._begun = 0
        self._done = 0
        self._turns = threading.Condition()

    @contextmanager
    def writer_task(self) -> Iterator[None]:
        with self._derived_tables:
            yield

    @contextmanager
    def derivation_turn(self) -> Iterator[None]:
        """One derivation turn; counted as done only when its body returns without error."""
        with self._derived_tables:
            with self._turns:
                self._begun += 1
                turn = self._begun
            yield
        with self._turns:
            self._done = max(self._done, turn)
            self._turns.notify_all()

    def ticket(self) -> int:
        """Inside a writer task: the number of the first turn that will see what the task
        commits. Turns take the same lock as writer tasks, so every turn begun after this task
        ends sees its commit."""
        with self._turns:
            return self._begun + 1

    def wait(self, ticket: int, timeout: float) -> bool:
        """Wait until the turn `ticket` (or a later one) has finished without error; False on
        timeout."""
        deadline = time.monotonic() + timeout
        with self._turns:
            while self._done < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._turns.wait(left)
        return True
