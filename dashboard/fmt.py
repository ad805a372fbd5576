"""Formatting for people: escaping of anything that came from a span before it goes near
Markdown or a Plotly label, and (re-exported from queries/readable.py) durations, rates and
counts.

Span names, attributes and keys are data sent by whoever can reach the OTLP port: they must
show as text, never as live Markdown or HTML (a span named `<img src=x onerror=…>` or
`[click](javascript:…)`).
"""

from __future__ import annotations

import html
import re
import string
from typing import Any

# Durations, percentages, counts and the one "no value" mark are shared with the terminal
# output (queries/readable.py), so a figure reads the same in the dashboard and in the CLI.
from queries.readable import (  # noqa: F401 - re-exported for the pages
    NO_VALUE,
    count,
    duration,
    duration_axis_unit,
    instant,
    lower_bound_formats,
    missing,
    percent,
    percents_adding_up,
    plural,
    table_formats,
    text,
    timestamp_ns,
    usd,
    usd_headline,
    usd_nano,
)

# CommonMark lets a backslash escape any ASCII punctuation; escaping all of it is simpler
# and safer than guessing which characters a given Markdown flavour treats as syntax.
_MD_SPECIAL = set(string.punctuation)


def escape_md(value: Any) -> str:
    """`value` as Markdown that renders as exactly its text (one line)."""
    shown = "" if missing(value) else str(value)
    shown = " ".join(shown.split())  # no line breaks: they start new Markdown blocks
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in shown)


# A widget label Streamlit renders as Markdown, and whose text it also gives the widget as its
# accessible name, as typed: a step key of letters, digits and `:._/@+=-`, its underscores
# inside words (CommonMark does not emphasise intraword underscores) and no `:word:` pair (an
# emoji shortcode), is no Markdown at all and can be given as it is.
_PLAIN_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9:./@+=-]|(?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))*")
_SHORTCODE = re.compile(r":[A-Za-z0-9_+-]+:")


def label_text(value: Any) -> str:
    """`value` for a widget's label: as it is when it is no Markdown (tool:fetch_report), so
    that a screen reader reads the key and not `tool\\:fetch\\_report`; escaped otherwise
    (escape_md), when its text could make a link, an image or emphasis."""
    shown = "" if missing(value) else str(value)
    if _PLAIN_LABEL.fullmatch(shown) and not _SHORTCODE.search(shown):
        return shown
    return escape_md(shown)


def plot_text(value: Any) -> str:
    """`value` for a Plotly label: Plotly renders a subset of HTML (<a href>, <b>, <br>) in
    labels, so escape it to entities, which Plotly shows as the characters.

    Plotly is no HTML parser: its `convertEntities` knows numeric references and only eight
    names (amp, lt, gt, nbsp, mu, times, plusmn, deg; plotly.js src/lib/svg_text_utils.js),
    and shows any other as typed, so `html.escape`'s `&quot;` appeared literally in chart
    labels. Quotes therefore go out as numeric references. With `<` escaped no
    tag can open, so nothing from a span becomes markup."""
    escaped = html.escape("" if missing(value) else str(value), quote=True)
    return escaped.replace("&quot;", "&#34;")


def readable_table(frame: Any) -> Any:
    """`frame` styled as people read it (the same formats as `report --format table`:
    queries.readable.table_formats), the raw values kept underneath for sorting and copying.
    A cost that is a lower bound reads `≥ $0.052` there too (docs/metrics.md §11.4), as do
    the figures made from it (lower_bound_formats)."""
    formats = table_formats(frame.columns)
    if not formats:
        return frame
    styled = frame.style.format(formats, na_rep=NO_VALUE)
    rows, bounded = lower_bound_formats(frame, formats)
    if rows is not None and bounded:
        styled = styled.format(bounded, na_rep=NO_VALUE,
                               subset=(rows.to_numpy(), list(bounded)))
    return styled
