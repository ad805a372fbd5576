"""The database, and the one front every other package uses it through: what the others may use
of the store is imported here, and nothing outside store/ imports deeper
(tests/project/test_layers.py).

Its rooms, each a package that owns its part and its SQL, in the order they stand on each other
(docs/design.md, "Layout"):
- file/: the database file and its one owner, the schema and migrations, the SQL registry;
- rows/: the row contract (FlatBatch), the typed attributes, the vocabulary, rejections;
- prices/: the bundled price table (genai-prices, matched once per model) and the prices a
  team sets (docs/metrics.md §11.3);
- derive/: runs and steps from spans (the derivation's SQL, the conventions it is rendered
  from), the pending marks it works through, when it runs, and why a span is a step;
- write/: the writer (one transaction a batch, a span stored once), the bulk loads' background
  writer, and serve's group commit with the thread that derives beside it;
- retention/: removing traces older than N days, whole, in slices the writer interleaves;
- declared/: budgets and step caps a team declares (docs/guide.md#declaring-budgets), checked,
  stored, re-measured;
- clickhouse/: the ClickHouse backend (the package is its API: `clickhouse.connect`, ...), its
  tables, its derivation, its declared budgets (`clickhouse_declared`) and prices
  (`clickhouse_prices`);
- read/: the one way every command and the dashboard open what they read (`Source`, `reader`).

Beside the rooms, lifecycle.py, below them all (it imports none): the one shape of everything
that owns a thread (start, stop, join with a timeout, a name), the receivers' included.

Below, the rooms' names in the alphabetical order of their modules: those the product uses, and
only those (tests/project/test_layers.py checks both ways). Four are modules used as namespaces:
`clickhouse`, `clickhouse_declared` and `clickhouse_prices` (their connect, apply, ... beside
DuckDB's), and `vocabulary` (the words of docs/metrics.md, as data). The names of clickhouse/,
read/, write/, retention/, declared/service.py and derive/explain.py are imported on their
first use (ON_FIRST_USE). What the tests and benches use beyond these is in store/testing.py,
which the product never imports.

Nothing here imports another package of budgetscope: everything else stands on it
(docs/design.md, "Layers"; tests/project/test_layers.py keeps that true).
"""

import importlib
from typing import TYPE_CHECKING, Any

# declared/: declared budgets and caps, on the file (`apply`) or through serve's writer
from store.declared.budgets import (
    DIMENSIONS,
    Change,
    DeclarationError,
    apply,
    checked_agent,
    checked_step_key,
    declarations,
    parse_duration_ms,
    parse_tokens,
    parse_usd_nano,
)

# derive/: when the derivation runs, and running it now
from store.derive.scheduling import (
    DERIVE,
    ROOT_GRACE_SECONDS,
    CatchUp,
    catch_up,
    derive_now,
    measure_rootless,
    pending_derivations,
)

# file/: opening the file (one owner at a time), the owning connection, schema and registry
from store.file.database import (
    BACKEND_ENV,
    DB_ENV,
    DEFAULT_DB,
    READER_WAIT_SECONDS,
    DatabaseBusy,
    connect,
    serve_sidecar_path,
)
from store.file.ddl import SchemaError
from store.file.owner import DatabaseOwner, MemoryLimitError
from store.file.sql_files import (
    CLICKHOUSE_PARAMETER,
    DUCKDB_PARAMETER,
    Query,
    QueryFileError,
    bound_parameters,
    load_queries,
)

# lifecycle.py: the shape of every owner of a thread, the receivers' too
from store.lifecycle import joined

# prices/: the bundled price table and the prices a team sets (docs/metrics.md §11.3)
from store.prices.overrides import (
    PriceChange,
    PriceError,
    format_day,
    format_usd_per_mtok,
    listing,
    parse_from,
    parse_rate,
)
from store.prices.overrides import apply as apply_price
from store.prices.overrides import unpriced as unpriced_models

# rows/: what decoding hands the writer, and the words its values take
from store.rows import vocabulary
from store.rows.batch import CONVENTIONS, DENSE_TYPED_COLUMNS, FlatBatch
from store.rows.rejections import Rejection, RejectionLog
from store.rows.typed_attributes import (
    CONVENTION_COLUMNS,
    TYPED_ATTRIBUTES,
    RefusedValue,
    merge_named_columns,
)
from store.rows.vocabulary import EXCEPTION_EVENT

# The ClickHouse backend (clickhouse/), the reader that may open it (read/) and the explanation
# of a trace's spans (derive/explain.py) import pandas, and the backend renders its derivation:
# 0.24 s and 41 MB more (measured) for a process that only decodes, writes or derives, such as
# bench_ingest's decoding, which never loaded them before the front. The writers (write/), and
# what stands on them (retention/, declared/service.py: serve's side of declared budgets and
# prices), import pyarrow and NumPy, 0.15-0.3 s more for a command that only reads or declares
# (`budgetscope budgets list`, `--help`: issue 48). Their names are imported on first use
# (`__getattr__` below); type checkers read them here.
if TYPE_CHECKING:
    # clickhouse/: the backend, and its declared budgets
    from store import clickhouse
    from store.clickhouse import declared as clickhouse_declared
    from store.clickhouse import prices as clickhouse_prices

    # declared/: declared budgets and prices through serve's writer
    from store.declared.service import (
        DeclaredBudgets,
        DeclaredPrices,
        Outcome,
        PriceOutcome,
        WriterBusy,
    )

    # derive/: why each span of a trace is, or is not, a step
    from store.derive.explain import explain_trace

    # read/: where the data is (`Source`) and how a command or the dashboard opens it
    from store.read.reader import (
        NoDatabase,
        SharedFile,
        Source,
        open_for_reading,
        open_reader,
        reader,
    )

    # retention/: old traces removed whole (`retain`), or by serve's schedule between commits
    from store.retention.passes import RetentionSchedule, retain

    # write/: storing batches, one at a time or grouped by serve's single writer
    from store.write.background_writer import BackgroundWriter
    from store.write.group_commit import Closed, GroupCommitter, Overloaded, WriteFailed
    from store.write.writer import SpanWriter

# name -> (module, its attribute; None: the module itself), as the block above imports them
ON_FIRST_USE: dict[str, tuple[str, str | None]] = {
    "clickhouse": ("store.clickhouse", None),
    "clickhouse_declared": ("store.clickhouse.declared", None),
    "clickhouse_prices": ("store.clickhouse.prices", None),
    **{name: ("store.declared.service", name)
       for name in ("DeclaredBudgets", "DeclaredPrices", "Outcome", "PriceOutcome",
                    "WriterBusy")},
    "explain_trace": ("store.derive.explain", "explain_trace"),
    **{name: ("store.read.reader", name)
       for name in ("NoDatabase", "SharedFile", "Source",
                    "open_for_reading", "open_reader", "reader")},
    "RetentionSchedule": ("store.retention.passes", "RetentionSchedule"),
    "retain": ("store.retention.passes", "retain"),
    "BackgroundWriter": ("store.write.background_writer", "BackgroundWriter"),
    **{name: ("store.write.group_commit", name)
       for name in ("Closed", "GroupCommitter", "Overloaded", "WriteFailed")},
    "SpanWriter": ("store.write.writer", "SpanWriter"),
}


def __getattr__(name: str) -> Any:
    """A name of ON_FIRST_USE, imported now (and kept, so this runs once a name)."""
    if name not in ON_FIRST_USE:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    module, attribute = ON_FIRST_USE[name]
    found = importlib.import_module(module)
    value = found if attribute is None else getattr(found, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    # clickhouse/
    "BACKEND_ENV", "clickhouse", "clickhouse_declared", "clickhouse_prices",
    # declared/
    "DIMENSIONS", "Change", "DeclarationError", "DeclaredBudgets", "DeclaredPrices", "Outcome",
    "PriceOutcome", "WriterBusy", "apply", "checked_agent", "checked_step_key", "declarations",
    "parse_duration_ms", "parse_tokens", "parse_usd_nano",
    # derive/
    "DERIVE", "ROOT_GRACE_SECONDS", "CatchUp", "catch_up", "derive_now", "explain_trace",
    "measure_rootless", "pending_derivations",
    # file/
    "CLICKHOUSE_PARAMETER", "DB_ENV", "DEFAULT_DB", "DUCKDB_PARAMETER", "DatabaseBusy",
    "DatabaseOwner", "MemoryLimitError", "Query", "QueryFileError", "SchemaError",
    "bound_parameters", "connect", "load_queries", "serve_sidecar_path",
    # lifecycle.py
    "joined",
    # prices/
    "PriceChange", "PriceError", "apply_price", "format_day", "format_usd_per_mtok", "listing",
    "parse_from", "parse_rate", "unpriced_models",
    # read/
    "READER_WAIT_SECONDS", "NoDatabase", "SharedFile", "Source", "open_for_reading", "open_reader",
    "reader",
    # retention/
    "RetentionSchedule", "retain",
    # rows/
    "CONVENTIONS", "CONVENTION_COLUMNS", "DENSE_TYPED_COLUMNS", "EXCEPTION_EVENT", "FlatBatch",
    "RefusedValue", "Rejection", "RejectionLog", "TYPED_ATTRIBUTES", "merge_named_columns",
    "vocabulary",
    # write/
    "BackgroundWriter", "Closed", "GroupCommitter", "Overloaded", "SpanWriter", "WriteFailed",
]
