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
    piece, which is there even when no row is), a piece's rows at a time."""
    header = True
    for piece in pieces:
        columns = [str(c) for c in piece.columns]
        lines = [_csv_line([csv_text(c, "") for c in columns])] if header else []
        header = False
        lines.extend(_csv_line([csv_text(value, column)
                                for value, column in zip(row, columns, strict=True)])
                     for row in piece.itertuples(index=False, name=None))
        if lines:
            yield "".join(lines).encode("utf-8")


def to_csv_bytes(frame: pd.DataFrame) -> bytes:
    return b"".join(csv_chunks([frame]))


def json_chunks(pieces: Iterable[pd.DataFrame]) -> Iterator[bytes]:
    """The JSON list of the rows of `pieces` as `json.dumps(records, indent=2)` writes it (a
    record's lines indented two more, `,` between records), a piece's rows at a time. Often
    read on a terminal: the controls JSON leaves raw are escaped (the same values)."""
    opened = False
    for piece in pieces:
        columns = [str(c) for c in piece.columns]
        parts = []
        for row in piece.itertuples(index=False, name=None):
            record = {column: cell(value, column)
                      for value, column in zip(row, columns, strict=True)}
            text = _json_object(record)
            parts.append((",\n  " if opened else "[\n  ") + text.replace("\n", "\n  "))
            opened = True
        if parts:
            yield json_inert("".join(parts)).encode("utf-8")
    yield b"\n]\n" if opened else b"[]\n"


def to_json_text(frame: pd.DataFrame) -> str:
    return b"".join(json_chunks([frame])).decode("utf-8")


def _json_value(value: Any) -> str:
    if isinstance(value, Decimal):
        return dollar_text(value)  # a JSON number with the amount's own digits
    return json.dumps(value, ensure_ascii=False)


def _json_object(record: dict[str, Any]) -> str:
    """What `json.dumps(record, indent=2, ensure_ascii=False)` writes for a flat object
    (tests/queries/test_money.py holds the two equal), with dollars written as numbers of their
    exact digits: json.dumps knows no Decimal, and a float would print 0.1 + 0.2 as
    0.30000000000000004."""
    if not record:
        return "{}"
    return "{\n" + ",\n".join(f"  {json.dumps(key, ensure_ascii=False)}: {_json_value(value)}"
                               for key, value in record.items()) + "\n}"


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
