"""Formatting for people: durations in readable units, rates as percentages, and escaping of
anything that came from a span before it goes near Markdown or a Plotly label.

Span names, attributes and keys are data sent by whoever can reach the OTLP port: they must
show as text, never as live Markdown or HTML (a span named `<img src=x onerror=…>` or
`[click](javascript:…)`).
"""

from __future__ import annotations

import html
import math
import string
from typing import Any

import pandas as pd

# CommonMark lets a backslash escape any ASCII punctuation; escaping all of it is simpler
# and safer than guessing which characters a given Markdown flavour treats as syntax.
_MD_SPECIAL = set(string.punctuation)


def missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def escape_md(value: Any) -> str:
    """`value` as Markdown that renders as exactly its text (one line)."""
    text = "" if missing(value) else str(value)
    text = " ".join(text.split())  # no line breaks: they start new Markdown blocks
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def plot_text(value: Any) -> str:
    """`value` for a Plotly label: Plotly renders a subset of HTML (<a href>, <b>, <br>) in
    labels, so escape it to entities, which Plotly shows as the characters.

    Plotly is no HTML parser: its `convertEntities` knows numeric references and only eight
    names (amp, lt, gt, nbsp, mu, times, plusmn, deg; plotly.js src/lib/svg_text_utils.js),
    and shows any other as typed, so `html.escape`'s `&quot;` appeared literally in chart
    labels (issue 14). Quotes therefore go out as numeric references. With `<` escaped no
    tag can open, so nothing from a span becomes markup."""
    escaped = html.escape("" if missing(value) else str(value), quote=True)
    return escaped.replace("&quot;", "&#34;")


def duration(ms: Any) -> str:
    """Milliseconds in the unit a person reads best: 850 ms, 12.3 s, 4 min 05 s, 2 h 03 min."""
    if missing(ms):
        return "–"
    value = float(ms)
    sign = "−" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return "0 ms"
    if value < 1:
        return f"{sign}{value:.2f} ms"
    if value < 1_000:
        return f"{sign}{value:.0f} ms"
    if value < 60_000:
        return f"{sign}{value / 1000:.1f} s"
    if value < 3_600_000:
        minutes, seconds = divmod(round(value / 1000), 60)
        return f"{sign}{minutes} min {seconds:02d} s"
    hours, minutes = divmod(round(value / 60_000), 60)
    return f"{sign}{hours} h {minutes:02d} min"


def percent(value: Any, digits: int = 1) -> str:
    if missing(value) or (isinstance(value, float) and math.isinf(value)):
        return "–"
    return f"{float(value) * 100:.{digits}f}%"


def count(value: Any) -> str:
    return "–" if missing(value) else f"{int(value):,}"


def timestamp_ns(ns: Any) -> str:
    """Epoch nanoseconds as `2026-11-23 08:15:02 UTC`."""
    if missing(ns):
        return "–"
    return pd.Timestamp(int(ns), unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_axis_unit(max_ms: float) -> tuple[str, float]:
    """A unit for a chart axis whose values go up to `max_ms`: (label, divisor from ms)."""
    if max_ms >= 2 * 3_600_000:
        return "h", 3_600_000.0
    if max_ms >= 2 * 60_000:
        return "min", 60_000.0
    if max_ms >= 2_000:
        return "s", 1_000.0
    return "ms", 1.0
