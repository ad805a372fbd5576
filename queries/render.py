"""DataFrame → CSV, JSON or a text table, deterministically.

The dashboard's CSV download and `budgetscope report` call `to_csv_bytes`, so both give the
same bytes for the same frame. Cell rules:
- undefined (NULL, NaN) → empty cell (JSON: null);
- booleans → `true` / `false`;
- integers → decimal digits;
- floats → fixed decimals: 3 for columns ending in `_ms` (microsecond resolution), 6 for every
  other float (rates, shares, utilisations); -0 is written 0;
- rows in the order the query gives (every report query ends in a total ORDER BY);
- UTF-8, comma-separated, `\n` line ends, minimal quoting, a header row.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import numpy as np
import pandas as pd


def _decimals(column: str) -> int:
    return 3 if column.endswith("_ms") else 6


def cell(value: Any, column: str) -> str | int | float | bool | None:
    """The value as it is written: None, bool, int, a float rounded, or a string."""
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
    return str(value)


def text_cell(value: Any, column: str) -> str:
    shown = cell(value, column)
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "true" if shown else "false"
    if isinstance(shown, float):
        return f"{shown:.{_decimals(column)}f}"
    return str(shown)


def text_rows(frame: pd.DataFrame) -> list[list[str]]:
    columns = [str(c) for c in frame.columns]
    return [[text_cell(value, column) for value, column in zip(row, columns, strict=True)]
            for row in frame.itertuples(index=False, name=None)]


def to_csv_bytes(frame: pd.DataFrame) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([str(c) for c in frame.columns])
    writer.writerows(text_rows(frame))
    return out.getvalue().encode("utf-8")


def to_json_text(frame: pd.DataFrame) -> str:
    columns = [str(c) for c in frame.columns]
    records = [{column: cell(value, column) for value, column in zip(row, columns, strict=True)}
               for row in frame.itertuples(index=False, name=None)]
    return json.dumps(records, indent=2, ensure_ascii=False) + "\n"


def to_text_table(frame: pd.DataFrame) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    columns = [str(c) for c in frame.columns]
    rows = text_rows(frame)
    widths = [max([len(column)] + [len(row[i]) for row in rows]) for i, column in
              enumerate(columns)]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]

    def line(cells: list[str]) -> str:
        return "  ".join(text.rjust(width) if right else text.ljust(width)
                         for text, width, right in zip(cells, widths, numeric, strict=True)
                         ).rstrip()

    out = [line(columns), line(["-" * width for width in widths])]
    out.extend(line(row) for row in rows)
    if not rows:
        out.append("(no rows)")
    return "\n".join(out) + "\n"
