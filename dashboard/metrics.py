"""Headline numbers, as every page shows them: a row of metric tiles that wraps.

A page hands `headline` its figures as `Metric`s; the tiles sit in a horizontal container that
wraps (Streamlit's `st.container(horizontal=True)`), each tile as wide as its label and value.
In fixed columns (`st.columns(5)`) a tile got a fifth of the page whatever it held, and below
~1100 px Streamlit cut both with an ellipsis: "38…" under "Culprit…" on Attribution, "exhau…"
for an outcome on the run view. Wrapping, a narrow window shows fewer tiles a row, each whole.

A new figure (a cost, a token count) is one more `Metric` in the page's list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import streamlit as st

DeltaColor = Literal["normal", "inverse", "off"]


@dataclass(frozen=True)
class Metric:
    """One headline figure: its label, its value as shown (fmt.percent, fmt.duration, …), an
    optional change against something, how the change is coloured (`inverse`: a rise is bad),
    and a tooltip."""

    label: str
    value: str
    delta: str | None = None
    delta_color: DeltaColor = "normal"
    help: str | None = None

    @property
    def unchanged(self) -> bool:
        """A change that rounds to nothing (`±0`): shown without colour or arrow."""
        return self.delta == "±0"


def headline(figures: Sequence[Metric], key: str, where: Any = None) -> None:
    """The figures as tiles in a row that wraps to fewer a row when the page is narrow, none
    cut; `key` names the row (its element carries `st-key-<key>`, which the browser tests
    measure); `where`: the container to draw in (default: the page)."""
    row = (where or st).container(horizontal=True, gap="medium", key=key)
    for figure in figures:
        row.metric(figure.label, figure.value, figure.delta,
                   delta_color="off" if figure.unchanged else figure.delta_color,
                   delta_arrow="off" if figure.unchanged else "auto",
                   help=figure.help, width="content")
