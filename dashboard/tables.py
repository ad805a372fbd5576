"""Tables as every page shows them: st.dataframe without the index, a missing value as the one
no-value mark, each text column wide enough for its longest value, and a height that shows the
rows instead of a box of ten."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import fmt


def table(data: Any, **options: Any) -> Any:
    """st.dataframe as every page shows a table: without the index, and a missing value as the
    one no-value mark (Streamlit shows "None" for it, whatever a Styler says)."""
    options.setdefault("hide_index", True)
    options.setdefault("placeholder", fmt.NO_VALUE)
    options["column_config"] = _text_widths(data, options.get("column_config") or {},
                                            options.get("column_order"))
    return st.dataframe(data, **options)


# Source Sans at the grid's 14 px: about 7 px a character (hex ids are wide), plus padding.
_PX_PER_CHAR, _PADDING, _WIDEST = 7.0, 20, 300
_MEASURED_ROWS = 10  # about the rows the grid measures before the page is drawn


def _text_widths(data: Any, config: dict[str, Any], order: Any) -> dict[str, Any]:
    """A width for each text column from its longest value over every row: the grid sizes a
    column by its first rows only, so a longer value further down ("queue:handoff_queue" under
    "model:gpt-4o") was cut with an ellipsis. A width the page set wins."""
    frame = getattr(data, "data", data)  # a Styler's frame
    if not hasattr(frame, "columns") or frame.empty:
        return config
    out = dict(config)
    for column in (list(order) if order else list(frame.columns)):
        if column not in frame.columns or str(frame[column].dtype) not in ("object", "str",
                                                                         "string"):
            continue
        given = out.get(column)
        if isinstance(given, dict) and given.get("width") is not None:
            continue
        label = given.get("label") if isinstance(given, dict) else given
        lengths = frame[column].map(lambda v: len(str(v)) if v is not None else 1)
        longest = int(lengths.max())
        # Only where a value beyond the first rows is longer than those the grid measures:
        # elsewhere its own measure (of the real font) is the better one.
        if longest <= max(len(str(label or column)), int(lengths.head(_MEASURED_ROWS).max())):
            continue
        width = min(_WIDEST, round(longest * _PX_PER_CHAR + _PADDING))
        out[column] = ({**given, "width": width} if isinstance(given, dict)
                       else st.column_config.Column(label, width=width))
    return out


def table_height(rows: int, most: int = 30) -> int:
    """Pixels for a table of `rows` rows: all of them up to `most`, then it scrolls (Streamlit's
    default boxes every table to ten rows, above an empty page)."""
    return 38 + 35 * max(1, min(rows, most))

