"""The ClickHouse form of a DuckDB report query, produced by sqlglot (DuckDB → ClickHouse) and
a few rewrites of our own where sqlglot's output would run but answer differently.

Every report query is written once, in DuckDB SQL (queries/sql/*.sql). The ClickHouse backend
(store/clickhouse/, through queries.loader.CLICKHOUSE_QUERIES) runs `translate(text)` of it,
except for the queries listed in OVERRIDES, whose hand-written ClickHouse file in
queries/sql/clickhouse/ says the same thing another way, for the reason given there.

What the rewrites keep equal (tests/clickhouse/test_clickhouse_backend.py compares the outputs byte
for byte):
- tables: the derived tables are prefixed on ClickHouse (TABLES), beside the exporter's own;
- parameters: `$since_ns::BIGINT` becomes a ClickHouse query parameter `{since_ns:Nullable(Int64)}`
  typed from PARAMETER_TYPES (the values stay bound, never formatted into the text);
- `a // b` is intDiv (sqlglot divides in floats, which loses nanoseconds above 2^53);
- quantile_cont is quantileExactInclusive (linear interpolation, as DuckDB; sqlglot's
  `quantile` is ClickHouse's sampled estimate);
- make_timestamp and strftime read the epoch in UTC, with strftime's format codes mapped;
- a sum, a percentile or an arg_max / arg_min that can run over no rows (no GROUP BY, or
  under FILTER) is NULL there, as in DuckDB, not ClickHouse's 0, NaN or '' (sumOrNull,
  sumIfOrNull, argMaxOrNull, ...OrNull);
- a projected condition (`x IS NOT NULL AS reconciled`) is a Bool, not ClickHouse's UInt8;
- a qualified projection (`c.step_key`) is named after its column, as DuckDB names it;
- hash() is cityHash64 (a different hash: only the order of exact ties can differ).
Anything sqlglot reads that these rules do not cover is translated by sqlglot alone; a
DuckDB construct the rules know to be unsafe raises TranslationError, so a new query either
translates correctly or fails its test, never silently answers differently.

Translation runs once per query per process, on the first ClickHouse use (functools.cache;
about 10 ms a query), so DuckDB-only processes never import sqlglot. It is not generated
into files at build time: there is then no second copy that could go stale.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlglot import exp

# Tables the reports read: DuckDB name -> ClickHouse name (the derived ones are
# store/clickhouse/sql/derive_build.sql's; the declarations store/clickhouse/declared.py's).
TABLES = {
    "runs": "budgetscope_runs",
    "steps": "budgetscope_steps",
    "write_steps": "budgetscope_write_steps",
    "reconcile_links": "budgetscope_reconcile_links",
    "metered_spans": "budgetscope_metered_spans",
    "declared_budgets": "budgetscope_declared_budgets",
}

# Every parameter a report query binds, with its ClickHouse type. Nullable where the filter
# may leave it unset (queries.filters.Filters.parameters gives None).
PARAMETER_TYPES = {
    "since_ns": "Nullable(Int64)",
    "until_ns": "Nullable(Int64)",
    "now_ns": "Int64",
    "agent": "Nullable(String)",
    "step_key": "Nullable(String)",
    "step_class": "Nullable(String)",
    "uncertain": "Bool",
    "reconciled": "Bool",
    "orphan": "Bool",
    "run_id": "String",
    "trace_id": "String",
    "prefix": "String",
    "span_id": "Nullable(String)",
    "limit": "Int64",
    "bin_width": "Float64",
    "dimension": "String",
}

# The one allow-list of hand-written ClickHouse queries that replace a translation, and why.
OVERRIDES = {
    "trace_waiting": "reads otel_traces, which has no arrival time, where the DuckDB file has "
                     "the spans, the traces waiting for their root and the derivation marks",
    "database_status": "reads other tables: otel_traces has no arrival time and the build "
                       "state lives in budgetscope_derive_state; no pending or failed "
                       "derivation exists on a backend rebuilt whole",
    "run_log_records": "reads the Collector's otel_logs (Timestamp, Body, LogAttributes) "
                       "instead of the DuckDB log_records table, and collapses records the "
                       "Collector delivered twice",
    "reconciliation_by_period": "a different plan: budgetscope_write_steps is a table there, "
                                "with each write's reconciled and orphan flags, while the "
                                "DuckDB file avoids its write_steps view (which ranks every "
                                "reconciliation on each read); same rule, same counts",
    "run_span_details": "reads the Collector's otel_traces (SpanAttributes, the Events "
                        "arrays, StatusMessage) instead of the DuckDB spans table, and collapses "
                        "spans the Collector delivered twice",
    "weekly_report": "a different plan: budgetscope_steps carries its run's ISO week "
                     "(derive_build.sql), so steps group by week directly instead of per "
                     "run start joined to weeks; same groups, same sums",
}

# DuckDB strftime codes -> ClickHouse formatDateTime codes (the ones our queries use; any
# other code is refused rather than passed through with another meaning, e.g. %M).
_FORMAT_CODES = {"%Y": "%Y", "%m": "%m", "%d": "%d", "%H": "%H", "%M": "%i", "%S": "%S",
                 "%g": "%f", "%%": "%%"}


class TranslationError(ValueError):
    """A DuckDB construct the translation does not carry over faithfully."""


def _format(duckdb_format: str) -> str:
    out, i = [], 0
    while i < len(duckdb_format):
        if duckdb_format[i] == "%":
            code = duckdb_format[i:i + 2]
            if code not in _FORMAT_CODES:
                raise TranslationError(f"strftime code {code!r} has no mapping")
            out.append(_FORMAT_CODES[code])
            i += 2
        else:
            out.append(duckdb_format[i])
            i += 1
    return "".join(out)


def _function(name: str, *args: exp.Expression) -> exp.Expression:
    from sqlglot import exp

    return exp.Anonymous(this=name, expressions=list(args))


def _in_group_by_select(node: exp.Expression) -> bool:
    from sqlglot import exp

    select = node.find_ancestor(exp.Select)
    return select is not None and select.args.get("group") is not None


def _rewrite(node: exp.Expression, ctes: frozenset[str]) -> exp.Expression:
    from sqlglot import exp

    if isinstance(node, exp.Table) and not node.args.get("db") and node.name in TABLES \
            and node.name not in ctes:
        renamed = node.copy()
        renamed.set("this", exp.to_identifier(TABLES[node.name]))
        if not node.alias:  # a column qualified with the DuckDB name still resolves
            renamed.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
        return renamed
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Placeholder):
        return _parameter(node.this)
    if isinstance(node, exp.Placeholder):
        return _parameter(node)
    if isinstance(node, exp.IntDiv):
        return _function("intDiv", node.this, node.expression)
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.PercentileCont):
        return exp.ParameterizedAgg(this="quantileExactInclusiveIfOrNull",
                                    expressions=[node.this.expression],
                                    params=[node.this.this, node.expression.this])
    if isinstance(node, exp.PercentileCont) and not isinstance(node.parent, exp.Filter):
        name = "quantileExactInclusive" if _in_group_by_select(node) else \
            "quantileExactInclusiveOrNull"
        return exp.ParameterizedAgg(this=name, expressions=[node.expression],
                                    params=[node.this])
    if isinstance(node, exp.UnixToTime):
        scale = node.args.get("scale")
        if scale is None or scale.name != "6":
            raise TranslationError("make_timestamp/to_timestamp other than microseconds")
        return _function("fromUnixTimestamp64Micro", node.this, exp.Literal.string("UTC"))
    if isinstance(node, exp.TimeToStr):
        fmt = node.args["format"].name
        value = node.this
        if "%g" in fmt:  # milliseconds: a 3-digit scale, %f printing the scale's digits
            value = _function("toDateTime64", value, exp.Literal.number(3),
                              exp.Literal.string("UTC"))
        return _function("formatDateTime", value, exp.Literal.string(_format(fmt)))
    if isinstance(node, exp.Week):
        return _function("toISOWeek", node.this)  # DuckDB's week() is the ISO week
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name == "isoyear":
            return _function("toISOYear", *node.expressions)
        if name == "hash":
            return _function("cityHash64", *node.expressions)
        if name in {"epoch_us", "epoch_ms", "epoch_ns", "date_trunc"}:
            raise TranslationError(f"{name}() has no faithful translation here")
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
        return _function("any", node.this.this)  # ClickHouse's any() skips NULLs
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.Sum):
        condition = node.expression.this  # Filter(this=agg, expression=Where)
        return _function("sumIfOrNull", node.this.this, condition)
    if isinstance(node, exp.Sum) and not isinstance(node.parent, exp.Filter) and \
            not _in_group_by_select(node):
        return _function("sumOrNull", node.this)
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArgMax | exp.ArgMin):
        name = "argMaxIfOrNull" if isinstance(node.this, exp.ArgMax) else "argMinIfOrNull"
        return _function(name, node.this.this, node.this.expression, node.expression.this)
    if isinstance(node, exp.ArgMax | exp.ArgMin) and not isinstance(node.parent, exp.Filter) \
            and not _in_group_by_select(node):
        name = "argMaxOrNull" if isinstance(node, exp.ArgMax) else "argMinOrNull"
        return _function(name, node.this, node.expression)
    if isinstance(node, exp.CTE) and node.args.get("materialized"):
        node.set("materialized", None)  # a DuckDB planning hint
    return node


def _parameter(placeholder: exp.Placeholder) -> exp.Expression:
    from sqlglot import exp

    name = placeholder.name
    if name not in PARAMETER_TYPES:
        raise TranslationError(f"parameter ${name} has no ClickHouse type in PARAMETER_TYPES")
    return exp.Placeholder(this=exp.var(name), kind=exp.DataType.build(
        PARAMETER_TYPES[name], dialect="clickhouse"))


def _name_qualified_columns(tree: exp.Expression) -> None:
    """`SELECT c.step_key` is named `c.step_key` on ClickHouse when the join has USING, and
    `step_key` on DuckDB: name every qualified projection after its column."""
    from sqlglot import exp

    for select in tree.find_all(exp.Select):
        if isinstance(select.parent, exp.SetOperation) and select is select.parent.expression:
            continue  # a later branch of a UNION: the first branch names the columns
        names = [projection.alias_or_name for projection in select.expressions]
        for projection in list(select.expressions):
            if isinstance(projection, exp.Column) and projection.table and \
                    not isinstance(projection.this, exp.Star) and \
                    names.count(projection.name) == 1:
                projection.replace(exp.alias_(projection.copy(), projection.name))


def _bool_projections(select: exp.Expression) -> None:
    """A condition the outer SELECT returns is a Bool, as in DuckDB (ClickHouse: UInt8)."""
    from sqlglot import exp

    outer = select if isinstance(select, exp.Select) else select.find(exp.Select)
    for projection in list(outer.expressions):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, (exp.Predicate, exp.Connector, exp.Not)):
            value.replace(exp.Cast(this=value.copy(), to=exp.DataType.build("BOOLEAN")))


@cache
def translate(duckdb_text: str) -> str:
    """ClickHouse SQL for one DuckDB statement (comments dropped, no trailing ';')."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(duckdb_text.strip().rstrip(";"), read="duckdb")
    ctes = frozenset(cte.alias for cte in tree.find_all(exp.CTE))
    # Children before their parents, so that a rule sees its arguments already rewritten.
    for node in reversed(list(tree.walk(bfs=False))):
        new = _rewrite(node, ctes)
        if new is not node:
            node.replace(new)
    _name_qualified_columns(tree)
    _bool_projections(tree)
    return tree.sql(dialect="clickhouse", comments=False, pretty=True)
