"""docs/metrics.md §11.1-§11.3 on the ClickHouse backend: a span's usage, reported cost, token
and dollar budgets and the labels cost reads, from otel_traces' string-valued SpanAttributes,
exactly as store/rows/usage.py and store/rows/typed_attributes.py type them at ingest.

The Collector's ClickHouse exporter writes every attribute value as a string (pdata's AsString:
an int in decimal, a double in its shortest form, `1e-7` below 10^-6, a bool as `true`), so the
ClickHouse derivation reads each value the way ingest reads a *string* value:
- a count (`token_count`): Python's `int(text.strip())`, else `float(...)` when that is finite
  and whole; then 0..10^12. A double the agent sent (`1200.0`) arrives as `1200`, which both
  read alike;
- a cost (`usd_nano`): `Decimal(text.strip())`, finite, 0..10^9 USD, times 10^9 in Decimal's
  default context (28 digits, half to even) and rounded half to even to the nano-dollar. Done
  here on the digits as text, never through a float, so `0.0123` is 12,300,000 exactly;
- a label (`as_label`) or a flag (`as_bool`): stripped, lower-cased.
What Python accepts beyond ASCII is accepted too: Unicode whitespace around a value (str.strip
removes the 29 characters str.isspace names) and Unicode decimal digits (`١٢` is 12), both
mapped from the tables of the Python that runs this module, as ingest maps them.

The attributes and their order come from store/rows/usage.py (USAGE_SPELLINGS,
COST_CANDIDATES), the one table both derivations read; `fragments()` renders the ClickHouse
SQL that store/clickhouse/sql/derive_build.sql carries as `/*@usage_*/` markers
(store/derive/conventions.py fills them). tests/clickhouse/test_clickhouse_usage_reads.py compares
every cast here with ingest's own over a corpus of odd values.
"""

from __future__ import annotations

import unicodedata
from functools import cache

from store.rows import usage

# The markers of derive_build.sql this module fills.
MARKERS = ("usage_reads", "usage_values", "usage_typed")
# The values the casts give besides a number: absent (NULL) and present but not valid.
INVALID = -1
# docs/metrics.md §11.1, §11.3, §2: every attribute read here, in the order ingest reads them
# (its `usage_ignored` lists invalid ones in this order): the quantities' spellings, the cost
# candidates, then the run's token and dollar budgets.
COUNT_ATTRIBUTES: tuple[str, ...] = tuple(
    attribute for spellings in usage.USAGE_SPELLINGS.values() for attribute in spellings)
COST_ATTRIBUTES: tuple[str, ...] = usage.COST_ATTRIBUTES
BUDGET_ATTRIBUTES: tuple[str, ...] = (usage.TOKEN_BUDGET, usage.USD_BUDGET)
# Labels and a flag typed as typed_attributes.py types them (as_label, as_bool).
LABELS = {"budget.refused_by": "budget_refused_by",
          "budget.run.exhausted_by": "budget_run_exhausted_by"}
INCLUDES_CACHE = "budget.usage.input_includes_cache"



@cache
def _spaces() -> str:
    """Python's str.isspace() characters: what str.strip() removes."""
    return "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


@cache
def _digits() -> tuple[tuple[str, int], ...]:
    """Python's decimal digits beyond ASCII with their values: what int(), float() and
    Decimal() read as digits (~0.3 s to list: only when the ClickHouse SQL is rendered)."""
    return tuple((chr(c), unicodedata.decimal(chr(c))) for c in range(0x80, 0x110000)
                 if unicodedata.decimal(chr(c), None) is not None)

# libmpdec's limits on a Decimal read from text (64-bit builds): the exponent of its last
# digit, and its adjusted exponent (of the first digit); beyond them Decimal() refuses it.
_DECIMAL_MIN_EXPONENT = -1999999999999999997
_DECIMAL_MAX_ADJUSTED = 999999999999999999
_CONTEXT_DIGITS = 28  # decimal.DefaultContext.prec, the precision of `amount * NANO`


def _string(text: str) -> str:
    """A ClickHouse string literal (backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _char_class(characters: str) -> str:
    """An RE2 character class of these characters, each as \\x{hex}."""
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in characters) + "]"


def strip(x: str) -> str:
    """str.strip(): Unicode whitespace removed at both ends."""
    spaces = _char_class(_spaces())
    return f"replaceRegexpAll({x}, {_string(f'^{spaces}+|{spaces}+$')}, '')"


def ascii_digits(x: str) -> str:
    """Unicode decimal digits as the ASCII digits Python reads them as (only when the text is
    not ASCII already)."""
    source = "".join(c for c, _ in _digits())
    target = "".join(str(d) for _, d in _digits())
    return f"if(match({x}, '^[\\\\x00-\\\\x7f]*$'), {x}, " \
           f"translateUTF8({x}, {_string(source)}, {_string(target)}))"


def _lambda(variable: str, body: str, value: str) -> str:
    """`body` with `variable` bound to `value` (ClickHouse has no LET: a one-element map)."""
    return f"arrayMap({variable} -> {body}, [{value}])[1]"


# Python's grammars, on text stripped and with ASCII digits:
# int(): an optional sign, digits with single underscores between them.
_INT = r"^[+-]?[0-9](_?[0-9])*$"
# float(): a decimal with single underscores between digits, or inf, infinity, nan.
_DIGITPART = r"[0-9](_?[0-9])*"
_FLOAT = (rf"^[+-]?((({_DIGITPART})?\.{_DIGITPART}|{_DIGITPART}\.?)([eE][+-]?{_DIGITPART})?"
          r"|(?i:inf|infinity|nan))$")
# Decimal() (every underscore dropped first): digits with an optional point, an exponent.
_DECIMAL = r"^([+-]?)([0-9]*)(\.([0-9]*))?([eE]([+-]?)([0-9]+))?$"


def token_count(x: str) -> str:
    """usage.token_count of a string value `x` (Nullable(String)): NULL when absent, INVALID
    when not a whole count in 0..10^12, else the count (Nullable(Int64))."""
    whole = (
        "if(t = '' OR NOT match(t, " + _string(_INT) + "), NULL, "
        "arrayMap(d -> if(d = '', toInt64(0), "
        f"if(startsWith(t, '-') OR length(d) > 13 OR toUInt64OrZero(d) > {usage.MAX_TOKENS}, "
        f"{INVALID}, toInt64OrZero(d))), "
        "[replaceRegexpOne(replaceAll(replaceRegexpOne(t, '^[+-]', ''), '_', ''), '^0+', '')]"
        ")[1])")
    floating = (
        "if(NOT match(t, " + _string(_FLOAT) + "), toInt64(" + str(INVALID) + "), "
        "arrayMap(f -> toInt64(if(isFinite(f) AND f = floor(f) AND f >= 0 AND "
        f"f <= {usage.MAX_TOKENS}, f, {INVALID})), "
        "[toFloat64OrNull(replaceAll(t, '_', ''))])[1])")
    body = f"if(v IS NULL, NULL, toNullable(coalesce({whole}, {floating})))"
    return _lambda("v", _lambda("t", body, ascii_digits(strip("v"))), x)


def _round_half_even(q: str, rest: str) -> str:
    """The integer part `q` (an integer expression) rounded half to even by the digits that
    follow it, `rest` (text, '' for none)."""
    return (f"{q} + if(substring({rest}, 1, 1) > '5' OR (substring({rest}, 1, 1) = '5' AND "
            f"(match(substring({rest}, 2), '[1-9]') OR {q} % 2 = 1)), 1, 0)")


def usd_nano(x: str) -> str:
    """usage.usd_nano of a string value `x` (Nullable(String)): NULL when absent, INVALID when
    not a finite amount of USD in 0..10^9, else nano-dollars (Nullable(Int64)), exactly as
    Decimal computes them."""
    # The parts of the text as Decimal reads it (underscores dropped, then stripped again):
    # p = [sign, integer digits, fraction digits, exponent sign, exponent digits].
    parts = ("extractAllGroups(t, " + _string(_DECIMAL) + ")[1]")
    # digits: the coefficient without leading zeros ('' for zero); e: the exponent of its last
    # digit (Int128, NULL when the exponent's text is beyond 64 bits)
    digits = "replaceRegexpOne(concat(p[2], p[4]), '^0+', '')"
    exponent = ("toInt128(toInt64OrNull(concat(p[6], "
                "if(replaceRegexpOne(p[7], '^0+', '') = '', '0', "
                "replaceRegexpOne(p[7], '^0+', ''))))) - length(p[4])")
    # Decimal refuses what libmpdec cannot hold; then a value is 0..10^9: n + e <= 10, and
    # at 10 only 10^9 itself
    accepted = (f"e IS NOT NULL AND e >= {_DECIMAL_MIN_EXPONENT} AND "
                f"e + greatest(length(d), 1) - 1 <= {_DECIMAL_MAX_ADJUSTED}")
    in_range = ("(d = '' OR (p[1] != '-' AND (length(d) + e <= 9 OR "
                "(length(d) + e = 10 AND match(d, '^10*$')))))")
    # amount * 10^9 in the default context: a coefficient of more than 28 digits is rounded
    # to 28 first (c: the coefficient after that, k: its exponent after the product); every
    # part is computed on every row (clamped, and the OrZero casts), and used only when valid
    context = _CONTEXT_DIGITS
    c = (f"if(length(d) <= {context}, d, toString("
         + _round_half_even(f"toUInt128OrZero(substring(d, 1, {context}))",
                            f"substring(d, {context + 1})") + "))")
    k = f"toInt64(least(greatest(e + 9 + greatest(length(d) - {context}, 0), -100), 100))"
    # then rounded half to even to a whole nano-dollar: c * 10^k, at most 10^18
    nano = ("if(k >= 0, toInt64OrZero(concat(c, repeat('0', toUInt64(greatest(k, 0))))), "
            "if(-k > length(c), toInt64(0), toInt64("
            + _round_half_even(
                "toInt64OrZero(concat('0', substring(c, 1, greatest(length(c) + k, 0))))",
                "substring(c, greatest(length(c) + k, 0) + 1)") + ")))")
    value = _lambda("c", _lambda("k", nano, k), c)
    checked = (f"if(NOT coalesce({accepted} AND {in_range}, false), {INVALID}, "
               f"if(d = '', toInt64(0), {value}))")
    number = _lambda("d", _lambda("e", checked, exponent), digits)
    parsed = f"if(length(p) = 0 OR concat(p[2], p[4]) = '', {INVALID}, {number})"
    decimal = _lambda("p", parsed, parts)
    body = f"if(v IS NULL, NULL, toNullable({decimal}))"
    cleaned = strip("replaceAll(" + strip("v") + ", '_', '')")
    return _lambda("v", _lambda("t", body, ascii_digits(cleaned)), x)


def as_label(x: str) -> str:
    """typed_attributes.as_label of a string value: stripped and lower-cased."""
    return f"lowerUTF8({strip(x)})"


def as_bool(x: str) -> str:
    """typed_attributes.as_bool of a string value: true, 1, yes / false, 0, no; else NULL."""
    label = as_label(x)
    return (f"CAST(multiIf({label} IN ('true', '1', 'yes'), true, "
            f"{label} IN ('false', '0', 'no'), false, NULL), 'Nullable(Bool)')")


def _array(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def _names(attributes: tuple[str, ...]) -> str:
    return "(" + ", ".join(_string(a) for a in attributes) + ")"


def _in(attributes: str) -> str:
    """The value of an attribute of `attributes` (the map of CTE `raw`), or NULL."""
    name = _string(attributes)
    return f"if(mapContains(usage_attributes, {name}), usage_attributes[{name}], NULL)"


def reads_sql() -> str:
    """CTE `raw` of derive_build.sql: the span's attributes that cost reads, as a map of their
    own (one pass over the span's attributes; most spans have none, and then nothing below
    casts anything), and each count, cost and budget among them cast (usage_casts: attribute
    → value, INVALID when not valid)."""
    read = (*COUNT_ATTRIBUTES, *COST_ATTRIBUTES, *BUDGET_ATTRIBUTES, usage.COST_CURRENCY,
            *LABELS, INCLUDES_CACHE)
    costs = (*COST_ATTRIBUTES, usage.USD_BUDGET)
    counts = (*COUNT_ATTRIBUTES, usage.TOKEN_BUDGET)
    # Cast here, one CTE before the casts are read: ClickHouse's analyzer copies an alias's
    # whole expression into every reference within its own SELECT, and `usage_values` reads
    # the casts once per attribute. Read from `typed`, these casts made a 17 MB query tree and
    # ~3.5 s of planning on every derivation, even of one span; read from `raw`'s columns,
    # they are computed once.
    casts = (f"mapApply((k, v) -> (k, multiIf(k IN {_names(costs)}, {usd_nano('v')}, "
             f"k IN {_names(counts)}, {token_count('v')}, NULL)), usage_attributes)")
    return (f"mapFilter((k, v) -> k IN {_names(read)}, SpanAttributes) AS usage_attributes,\n"
            f"               {casts} AS usage_casts")


def values_sql() -> str:
    """CTE `typed`: the labels and the flag; then `usage_values`, every attribute's
    value in ingest's order (NULL when absent), gen_ai.usage.cost.amount INVALID in another
    currency than USD."""
    def value(attribute: str) -> str:
        name = _string(attribute)
        cast = f"if(mapContains(usage_casts, {name}), usage_casts[{name}], NULL)"
        if attribute == usage.COST_AMOUNT:
            return (f"if({cast} IS NOT NULL AND usage_cost_currency IS NOT NULL AND "
                    f"usage_cost_currency != {_string(usage.USD)}, toNullable(toInt64({INVALID})),"
                    f" {cast})")
        return cast
    values = _array([value(a) for a in (*COUNT_ATTRIBUTES, *COST_ATTRIBUTES,
                                        *BUDGET_ATTRIBUTES)])
    labels = [f"{as_label(_in(attribute))} AS {column}"
              for attribute, column in LABELS.items()]
    return ",\n           ".join([
        f"{as_label(_in(usage.COST_CURRENCY))} AS usage_cost_currency",
        *labels,
        f"{as_bool(_in(INCLUDES_CACHE))} AS usage_input_includes_cache",
        f"CAST({values}, 'Array(Nullable(Int64))') AS usage_values"])


def _first_valid(first: int, count: int) -> str:
    """The first value >= 0 of usage_values[first .. first + count - 1] (1-based), else NULL."""
    return f"arrayFirstOrNull(x -> x >= 0, arraySlice(usage_values, {first}, {count}))"


def typed_sql() -> str:
    """CTE `recognised`: the typed columns, as ingest's merge_usage fills them: each quantity
    from its first valid spelling; the first cost candidate with a valid value (a group: the
    sum of its valid values); the budgets; and the names of the attributes whose value was
    ignored, in ingest's order."""
    columns = []
    position = 1
    for quantity, spellings in usage.USAGE_SPELLINGS.items():
        columns.append(f"{_first_valid(position, len(spellings))} AS {quantity}")
        position += len(spellings)
    # the cost candidates in order: each group's valid values summed, NULL when none
    groups = []
    for group in usage.COST_CANDIDATES:
        valid = ("arrayMap(x -> assumeNotNull(x), arrayFilter(x -> x >= 0, "
                 f"arraySlice(usage_values, {position}, {len(group)})))")
        groups.append(f"if(empty({valid}), NULL, toNullable(arraySum({valid})))")
        position += len(group)
    columns.append(f"arrayFirstOrNull(x -> x IS NOT NULL, {_array(groups)}) "
                   "AS cost_reported_nano")
    tokens, usd = position, position + 1
    columns.append(f"if(usage_values[{tokens}] >= 0, usage_values[{tokens}], NULL) "
                   "AS budget_total_tokens")
    columns.append(f"if(usage_values[{usd}] >= 0, usage_values[{usd}], NULL) "
                   "AS budget_total_usd_nano")
    names = _array([_string(a) for a in (*COUNT_ATTRIBUTES, *COST_ATTRIBUTES,
                                          *BUDGET_ATTRIBUTES)])
    columns.append(f"arrayFilter((name, x) -> x = {INVALID}, {names}, usage_values) "
                   "AS usage_ignored")
    return ",\n           ".join(columns)


@cache
def fragments() -> dict[str, str]:
    """The markers store/clickhouse/sql/derive_build.sql carries (conventions.render)."""
    return dict(zip(MARKERS, (reads_sql(), values_sql(), typed_sql()), strict=True))
