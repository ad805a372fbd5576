"""DataFrame → CSV, JSON or a text table, deterministically.

The dashboard's CSV download and `budgetscope report` call `to_csv_bytes`, so both give the
same bytes for the same frame. A report too large to hold is written in pieces instead
(`csv_chunks`, `json_chunks`, from the query's result a few thousand rows at a time): the
pieces joined are the bytes of the whole frame, and the whole frame's functions are those
pieces joined, so there is one definition of each format. Cell rules:
- undefined (NULL, NaN) → empty cell (JSON: null);
- booleans → `true` / `false`;
- integers → decimal digits;
- floats → fixed decimals: 3 for columns ending in `_ms` (microsecond resolution), 6 for every
  other float (rates, shares, utilisations); -0 is written 0;
- dollars (Decimal, from the store's integer nano-dollars: queries/money.py) → up to 9
  decimals, trailing zeros trimmed (`0.0123`, `2`), a number in JSON, never through a float;
- rows in the order the query gives (every report query ends in a total ORDER BY);
- UTF-8, comma-separated, `\n` line ends, a header row; a field is quoted (RFC 4180, `"`
  doubled) when it holds a comma, a quote, a line feed or a carriage return (Python's csv
  module leaves a lone `\r` unquoted when the line end is `\n`, which splits the row in a
  spreadsheet);
- formula injection (OWASP): a text cell that starts with `=`, `+`, `-`, `@`, a tab
  or a carriage return gets a leading `'`, so a spreadsheet shows it as text instead of running
  it (an agent named `=HYPERLINK(…)`). The rule looks at the value's type, not its look: a
  number (int or float column) is written as it is, negative ones included (`-0.250000` is a
  number, and a spreadsheet reads it as one); a string is prefixed whatever follows, so an
  agent called `-1` is written `'-1`. Names that start with one of those characters are
  therefore one `'` longer in the CSV than in the JSON and table forms, which are not
  spreadsheet input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from queries.money import dollar_text
from queries.readable import NO_VALUE, plural
from queries.terminal import json_inert, terminal_safe


def _decimals(column: str) -> int:
    return 3 if column.endswith("_ms") else 6


def cell(value: Any, column: str) -> str | int | float | bool | Decimal | None:
    """The value as it is written: None, bool, int, a float rounded, dollars, or a string."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        if math.isnan(number):
            return None
        rounded = round(number, _decimals(column))
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, Decimal):
        return value
    return str(value)


def text_cell(value: Any, column: str) -> str:
    return _text(cell(value, column), column)


def _text(shown: str | int | float | bool | Decimal | None, column: str) -> str:
    """A cell's text, from what `cell` made of its value."""
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "true" if shown else "false"
    if isinstance(shown, float):
        return f"{shown:.{_decimals(column)}f}"
    if isinstance(shown, Decimal):
        return dollar_text(shown)
    return str(shown)


def text_rows(frame: pd.DataFrame) -> list[list[str]]:
    columns = [str(c) for c in frame.columns]
    return [[text_cell(value, column) for value, column in zip(row, columns, strict=True)]
            for row in frame.itertuples(index=False, name=None)]


# What a spreadsheet takes as the start of a formula (OWASP "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_QUOTED = re.compile('[,"\n\r]')  # a field holding one of these is quoted
# A text either of those rules changes, in Arrow's (RE2's) syntax: _string_fields.
_SPECIAL = r'^[=+\-@\t\r]|[,"\n\r]'


def csv_text(value: Any, column: str) -> str:
    """One CSV cell's text before quoting: `text_cell`, with a text value that a spreadsheet
    would run as a formula neutralised by a leading `'`."""
    shown = cell(value, column)  # once: a report of 50,000 runs has a million cells
    text = _text(shown, column)
    if isinstance(shown, str) and text.startswith(_FORMULA_START):
        return "'" + text
    return text


def _csv_field(text: str) -> str:
    if _QUOTED.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_line(fields: list[str]) -> str:
    if fields == [""]:
        return '""\n'  # as Python's csv module writes it: a bare empty line is no row
    return ",".join(_csv_field(field) for field in fields) + "\n"


def csv_chunks(pieces: Iterable[pd.DataFrame]) -> Iterator[bytes]:
    """The CSV of the rows of `pieces` (one frame's rows in order, the header from the first
    piece, which is there even when no row is), a piece's rows at a time. The fields are made
    a column at a time (_column_fields), each as `csv_text` and `_csv_field` make it from the
    value a row gives: the same bytes, in about a sixth of the time a cell at a time took
    (bench/README.md, "Tokens and dollars: the cost reports")."""
    header = True
    for piece in pieces:
        columns = [str(c) for c in piece.columns]
        lines = [_csv_line([csv_text(c, "") for c in columns])] if header else []
        header = False
        if len(columns) > 1:
            fields = [_column_fields(piece.iloc[:, i], column)
                      for i, column in enumerate(columns)]
            if len(piece):
                lines.append("\n".join(map(",".join, zip(*fields, strict=True))) + "\n")
        else:  # no column, or one, whose empty field _csv_line writes as ""
            lines.extend(_csv_line([csv_text(value, column)
                                    for value, column in zip(row, columns, strict=True)])
                         for row in piece.itertuples(index=False, name=None))
        if lines:
            yield "".join(lines).encode("utf-8")


# Nullable dtypes whose values convert to Python's int, bool or float (None where missing).
_MASKED = (pd.Int8Dtype, pd.Int16Dtype, pd.Int32Dtype, pd.Int64Dtype, pd.UInt8Dtype,
           pd.UInt16Dtype, pd.UInt32Dtype, pd.UInt64Dtype, pd.BooleanDtype, pd.Float32Dtype,
           pd.Float64Dtype)


def _column_fields(values: pd.Series, column: str) -> list[str]:
    """Each value's CSV field, `_csv_field(csv_text(value, column))`, for a whole column: the
    dtype chooses the rule once instead of `cell` asking each value its type. The values are
    those a row of `itertuples` gives (Python's int, float and bool from numpy columns, the
    objects of an object column); a dtype not named here goes value by value through
    csv_text."""
    dtype = values.dtype
    if isinstance(dtype, (np.dtype, *_MASKED)) and dtype.kind in "iu":
        # an integer's decimal digits (Arrow writes them as str() does, in half the time);
        # missing ones empty
        digits = pc.cast(pa.array(values), pa.string()).fill_null("")
        return digits.to_pylist()
    if isinstance(dtype, np.dtype) and dtype.kind in "bfO":
        items = values.to_numpy().tolist()  # the Python values .item() gives, as itertuples
        if dtype.kind == "b":
            return ["true" if item else "false" for item in items]
        if dtype.kind == "f":
            return _float_fields(items, column)
        return _object_fields(items, column)
    if isinstance(dtype, pd.StringDtype):
        return _string_fields(values)
    if isinstance(dtype, _MASKED):
        items = values.to_numpy(dtype=object, na_value=None).tolist()
        if dtype.kind == "f":
            return _float_fields(items, column)
        return _object_fields(items, column)
    return [_csv_field(csv_text(value, column)) for value in values]


def _float_fields(items: list[Any], column: str) -> list[str]:
    """`cell` and `_text` of floats (None or NaN empty; -0 written 0), a column at a time,
    without `round`: the `f` format and `round` both round the float's exact binary value
    half to even (the same digits), and the float nearest those digits, which `round` gives,
    is formatted to them again (it is nearer to them than the float was, or the same one);
    only a zero's sign differs, which `cell` drops (tests/queries/test_render_csv.py)."""
    shape = f"{{:.{_decimals(column)}f}}".format
    zero = shape(0.0)
    negative_zero = "-" + zero
    fields = []
    for item in items:
        if item is None or item != item:
            fields.append("")
        else:
            text = shape(item)
            fields.append(zero if text == negative_zero else text)
    return fields


def _string_fields(values: pd.Series) -> list[str]:
    """`_text_field` of each text (a missing one and "" are both written empty), asked only
    of the few that a spreadsheet would run or that hold a character to quote, which Arrow's
    regular expressions find a column at a time."""
    texts = values.to_numpy(dtype=object, na_value="")
    special = pc.match_substring_regex(pa.array(values, type=pa.large_string()), _SPECIAL)
    for i in np.flatnonzero(special.fill_null(False).to_numpy(zero_copy_only=False)):
        texts[i] = _text_field(texts[i])
    return texts.tolist()


def _object_fields(items: list[Any], column: str) -> list[str]:
    """The fields of an object column (or a nullable one): the common types directly, the
    others through csv_text. Dollars are written once per object: queries/money.py makes one
    Decimal per distinct amount of a column, which its rows share (a budget, a zero)."""
    written: dict[int, str] = {}  # id → text, while `items` holds every object it names
    fields = []
    for item in items:
        kind = type(item)
        if item is None:
            fields.append("")
        elif kind is Decimal:  # digits, a sign and a point: nothing to quote
            text = written.get(id(item))
            if text is None:
                text = written[id(item)] = dollar_text(item)
            fields.append(text)
        elif kind is str:
            fields.append(_text_field(item))
        elif kind is int:
            fields.append(str(item))
        elif kind is bool:
            fields.append("true" if item else "false")
        else:
            fields.append(_csv_field(csv_text(item, column)))
    return fields


def _text_field(text: str) -> str:
    """A text value's field: a formula neutralised, then quoted when it must be."""
    if text.startswith(_FORMULA_START):
        text = "'" + text
    if _QUOTED.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def to_csv_bytes(frame: pd.DataFrame) -> bytes:
    return b"".join(csv_chunks([frame]))


# One encoder for every value: `json.dumps(value, ensure_ascii=False)` builds a new encoder on
# each call (only the all-defaults call shares one), a third of a large report's JSON time.
_JSON = json.JSONEncoder(ensure_ascii=False)


def json_chunks(pieces: Iterable[pd.DataFrame]) -> Iterator[bytes]:
    """The JSON list of the rows of `pieces` as `json.dumps(records, indent=2)` writes it (a
    record's lines indented two more, `,` between records), a piece's rows at a time. Often
    read on a terminal: the controls JSON leaves raw are escaped (the same values)."""
    opened = False
    for piece in pieces:
        columns = [str(c) for c in piece.columns]
        # each key written once per piece, not once per cell: a 36,000-run report has
        # 1.9 million cells
        heads = [f"\n    {_JSON.encode(column)}: " for column in columns]
        parts = []
        for row in piece.itertuples(index=False, name=None):
            text = _json_record(heads, [cell(value, column)
                                        for value, column in zip(row, columns, strict=True)])
            parts.append((",\n  " if opened else "[\n  ") + text)
            opened = True
        if parts:
            yield json_inert("".join(parts)).encode("utf-8")
    yield b"\n]\n" if opened else b"[]\n"


def to_json_text(frame: pd.DataFrame) -> str:
    return b"".join(json_chunks([frame])).decode("utf-8")


def _json_value(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)`, the common kinds without the encoder's
    machinery, dollars as the digits of their amount."""
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return dollar_text(value)  # a JSON number with the amount's own digits
    return _JSON.encode(value)


def _json_record(heads: Sequence[str], values: Sequence[Any]) -> str:
    """What `json.dumps(record, indent=2, ensure_ascii=False)` writes for a flat object, its
    lines indented two more (tests/queries/test_money.py holds the two equal), `heads` the
    keys already written with their indent. Dollars are written as numbers of their exact
    digits: json.dumps knows no Decimal, and a float would print 0.1 + 0.2 as
    0.30000000000000004. An encoded value holds no raw newline, so indenting by lines is
    indenting by keys."""
    if not heads:
        return "{}"
    return "{" + ",".join(head + _json_value(value)
                          for head, value in zip(heads, values, strict=True)) + "\n  }"


def to_text_table(frame: pd.DataFrame,
                  readable: Mapping[str, Callable[[Any], str]] | None = None,
                  right: frozenset[str] = frozenset(), *,
                  headers: Mapping[str, str] | None = None, width: int | None = None,
                  priority: Sequence[str] | None = None) -> str:
    """Columns padded to their widest cell; numbers right-aligned, and the columns in `right`
    (numbers already written as text). Meant for a terminal, so each cell is made inert first
    (no escape sequence or control character from a span). `readable` formats the named
    columns for people (queries/readable.py: 12.3 s, 31.9%); `headers` names them as shown
    (`budget` over "25.0 s", not `budget_ms`).

    `width`: the lines fit it. The columns are taken in the order of `priority` (default:
    left to right) while they fit, shown in the frame's order, and a last line names the ones
    left out and the width that shows them all (a line wider than the terminal wraps into a
    table nobody can read)."""
    names = [str(c) for c in frame.columns]
    columns = [terminal_safe(str((headers or {}).get(c, c))) for c in names]
    rows = text_rows(frame)
    for i, column in enumerate(frame.columns):
        shown = readable.get(column) if readable else None
        for row, value in zip(rows, frame[column], strict=True):
            if shown is not None:
                row[i] = shown(value)
            elif row[i] == "":
                row[i] = NO_VALUE  # one mark for "no value", as the dashboard shows it
    rows = [[terminal_safe(text) for text in row] for row in rows]
    widths = [max([len(column)] + [len(row[i]) for row in rows]) for i, column in
              enumerate(columns)]
    # dollars (Decimal objects, queries/money.py) are numbers: right-aligned as numbers are
    right = right | {str(c) for c in frame.columns if _holds_dollars(frame[c])}
    numeric = [str(c) in right or (pd.api.types.is_numeric_dtype(frame[c])
                                   and not pd.api.types.is_bool_dtype(frame[c]))
               for c in frame.columns]
    kept = _columns_that_fit(names, widths, width, priority)

    def line(cells: list[str]) -> str:
        return "  ".join(cells[i].rjust(widths[i]) if numeric[i] else cells[i].ljust(widths[i])
                         for i in kept).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(row) for row in rows)
    if not rows:
        out.append("(no rows)")
    left_out = [columns[i] for i in range(len(names)) if i not in kept]
    if left_out:
        import textwrap

        whole = sum(widths) + 2 * (len(widths) - 1)
        out.extend(textwrap.wrap(
            f"({plural(len(left_out), 'more column')} at --width {whole}, or in --format csv: "
            f"{', '.join(left_out)})", width=max(width or 0, 40), break_on_hyphens=False))
    return "\n".join(out) + "\n"


def _columns_that_fit(names: list[str], widths: list[int], width: int | None,
                      priority: Sequence[str] | None) -> list[int]:
    """The indexes of the columns shown, in the frame's order: all without a width; else
    those taken by priority (unnamed columns after, left to right) while they fit, the first
    one always."""
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        return list(range(len(names)))
    order = [names.index(n) for n in (priority or ()) if n in names]
    order += [i for i in range(len(names)) if i not in order]
    kept: list[int] = []
    used = -2
    for i in order:
        if not kept or used + 2 + widths[i] <= width:
            kept.append(i)
            used += 2 + widths[i]
    return sorted(kept)


def _holds_dollars(values: pd.Series) -> bool:
    return values.dtype == object and any(isinstance(value, Decimal) for value in values)
