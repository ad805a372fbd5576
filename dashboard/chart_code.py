"""Start the browser fetching Streamlit's Plotly code while the page's queries still run.

Streamlit loads the JavaScript behind `st.plotly_chart` (one 4.7 MB chunk in 1.67) only when the
first chart arrives, that is after the page's queries and figures are done, and a first-time
visitor then waits for it to download and compile before any chart is drawn: on 1.4M spans,
2.1 s between the script finishing and the overview's charts. A `modulepreload` hint sent as the
first thing on the page lets that happen while the script runs instead (measured: charts drawn
0.5 s after the script ends). The hint is harmless when the chunk is cached already, and when
a Streamlit upgrade renames the chunk it finds the new name (or sends nothing).
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

_STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
# The hint's own element is hidden: it is a <link>, and its empty block would add a gap.
_HIDE_OWN_BLOCK = ('<style>[data-testid="stElementContainer"]:has(link[rel="modulepreload"])'
                   "{display:none}</style>")


@functools.cache
def plotly_chunk() -> str | None:
    """The file name of the chunk holding Streamlit's Plotly chart, if this build has one."""
    found = sorted(_STATIC_JS.glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_plotly() -> None:
    """Hint the browser to fetch and compile the Plotly chunk now (a page with charts calls
    this before its first query). Relative to the page, as Streamlit's own index.html is, so
    it also works under `server.baseUrlPath`."""
    chunk = plotly_chunk()
    if chunk is None:
        return
    st.markdown(f'<link rel="modulepreload" href="./static/js/{chunk}">{_HIDE_OWN_BLOCK}',
                unsafe_allow_html=True)
