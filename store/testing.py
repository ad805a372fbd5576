"""What the tests and the benchmarks use of the store beyond its front: the schema's version and
DDL, the derivation's entry points and files, the writer's Arrow conversions, retention's pieces,
the typed attributes' tables; and a recorder of the derivation's statement files.

The product never imports this module (tests/project/test_layers.py fails on an import of it outside
tests/ and bench/): everything the product uses is in the front, store/__init__.py, and a name
used only by tests and benches is here rather than there, so the front says what the product
stands on. Like the front, it imports the rooms' public names only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

# derive/: the derivation run by hand (benches time it; tests derive a file they wrote), the
# statement files it runs, and docs/conventions.md as data (the renderers' allow-list)
from store.derive import conventions, statements
from store.derive.pending import PendingDerivations
from store.derive.statements import QUERIES as DERIVE_QUERIES
from store.derive.statements import RECOGNISE, rebuild_all, refresh_touched, set_root_cutoff

# file/: the schema's version, its DDL files and migrations
from store.file.ddl import SCHEMA_DIGEST, SCHEMA_VERSION, apply_schema, ddl_files, migration_steps
from store.file.owner import CHECKPOINT_THRESHOLD

# lifecycle.py: the shape every owner of a thread has (tests/server/test_lifecycle.py checks each)
from store.lifecycle import Lifecycle

# retention/: one pass driven by hand, and what it measures
from store.retention.passes import DAY_NS, RetentionPass, cutoff_for, file_bytes

# rows/: the typed attributes' tables, which tests compare ingest and the schema against
from store.rows.typed_attributes import (
    BUDGET_BOUNDS,
    BUDGET_NUMBER_KEYS,
    HTTP_STATUS_KEYS,
    MAX_BUDGET_MS,
    MERGED_INTO,
)
from store.rows.usage import USAGE_COLUMNS

# write/: the writer's Arrow conversions and schemas (the fuzz harness checks that what decoding
# accepts fits them), its hook and its result
from store.write.writer import (
    RESOURCE_SCHEMA,
    SCOPE_SCHEMA,
    AfterWrite,
    WriteResult,
    logs_to_arrow,
    rows_to_arrow,
    to_arrow,
)


@contextmanager
def statement_files_run() -> Iterator[list[str]]:
    """The names of the derivation's statement files (store/derive/sql/) run inside the block,
    in the order they ran: to tell which way the derivation went. Each file still runs as it
    would (the derivation looks statements.execute_file up at each call)."""
    ran: list[str] = []
    execute_file = statements.execute_file

    def recorded(con: duckdb.DuckDBPyConnection, name: str,
                 gates: dict[str, bool] | None = None) -> None:
        ran.append(name)
        execute_file(con, name, gates)

    statements.execute_file = recorded
    try:
        yield ran
    finally:
        statements.execute_file = execute_file


__all__ = [
    # derive/
    "DERIVE_QUERIES", "RECOGNISE", "PendingDerivations", "conventions", "rebuild_all",
    "refresh_touched", "set_root_cutoff", "statement_files_run",
    # lifecycle.py
    "Lifecycle",
    # file/
    "CHECKPOINT_THRESHOLD", "SCHEMA_DIGEST", "SCHEMA_VERSION", "apply_schema", "ddl_files",
    "migration_steps",
    # retention/
    "DAY_NS", "RetentionPass", "cutoff_for", "file_bytes",
    # rows/
    "BUDGET_BOUNDS", "BUDGET_NUMBER_KEYS", "HTTP_STATUS_KEYS", "MAX_BUDGET_MS", "MERGED_INTO",
    "USAGE_COLUMNS",
    # write/
    "RESOURCE_SCHEMA", "SCOPE_SCHEMA", "AfterWrite", "WriteResult", "logs_to_arrow",
    "rows_to_arrow", "to_arrow",
]
