"""The dashboard with some kinds of element left out, for bench_page_elements.py: what each kind
costs a first visit. `BENCH_MUTE` names the kinds, comma- or plus-separated:

- tables:  st.dataframe
- metrics: st.metric
- text:    captions, markdown, subheaders, headers, st.text, st.code, info and warning boxes
  (titles and errors stay)
- widgets: selectboxes, date inputs, toggles, checkboxes, buttons, download buttons, page links,
  text and number inputs, multiselects, sliders (a form's submit button stays: a form without
  one draws an error box instead)
- nav:     the sidebar's page navigation (st.navigation with position="hidden")

A left-out widget draws nothing and returns what it would have held (its session state, which
the pages and the sidebar set from the URL, else its default), so every page runs the same code
on the same data as the real one: the queries, the figures and the charts are unchanged.
Started by bench_page_elements.py in place of dashboard/streamlit_app.py; not part of the
product.
"""

from __future__ import annotations

import functools
import os
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

DASHBOARD = Path(__file__).resolve().parents[1] / "dashboard"
MUTE = frozenset(filter(None, os.environ.get("BENCH_MUTE", "").replace("+", ",").split(",")))


def _held(key: str | None, default: Any) -> Any:
    return st.session_state[key] if key is not None and key in st.session_state else default


def _nothing(self: DeltaGenerator, *args: Any, **kwargs: Any) -> None:
    return None


def _selectbox(self: DeltaGenerator, label: str, options: Any, index: int | None = 0,
               *args: Any, key: str | None = None, **kwargs: Any) -> Any:
    options = list(options)
    return _held(key, options[index] if options and index is not None else None)


def _valued(default_name: str, fallback: Any) -> Callable[..., Any]:
    """A widget whose first argument after the label is its value (toggle, checkbox, ...)."""

    def widget(self: DeltaGenerator, label: str, *args: Any, key: str | None = None,
               **kwargs: Any) -> Any:
        value = args[0] if args else kwargs.get(default_name, fallback)
        return _held(key, fallback if value is None else value)

    return widget


def _ranged(self: DeltaGenerator, label: str, min_value: Any = None, max_value: Any = None,
            value: Any = None, *args: Any, key: str | None = None, **kwargs: Any) -> Any:
    """slider and number_input: the value, else the minimum ("min" is number_input's default)."""
    return _held(key, min_value if value in (None, "min") else value)


def _multiselect(self: DeltaGenerator, label: str, options: Any, default: Any = None,
                 *args: Any, key: str | None = None, **kwargs: Any) -> Any:
    return _held(key, list(default or []))


KINDS: dict[str, dict[str, Callable[..., Any]]] = {
    "tables": {"dataframe": _nothing},
    "metrics": {"metric": _nothing},
    "text": {name: _nothing for name in ("caption", "markdown", "subheader", "header", "text",
                                         "code", "info", "warning")},
    "widgets": {
        "selectbox": _selectbox,
        "date_input": _valued("value", None),
        "toggle": _valued("value", False),
        "checkbox": _valued("value", False),
        "button": lambda self, *args, **kwargs: False,
        "download_button": lambda self, *args, **kwargs: False,
        "page_link": _nothing,
        "text_input": _valued("value", ""),
        "multiselect": _multiselect,
        "number_input": _ranged,
        "slider": _ranged,
    },
}
UNKNOWN = MUTE - KINDS.keys() - {"nav"}
if UNKNOWN:
    raise SystemExit(f"BENCH_MUTE: unknown kinds {sorted(UNKNOWN)}")



def _mute() -> None:
    for kind in MUTE & KINDS.keys():
        for name, replacement in KINDS[kind].items():
            setattr(DeltaGenerator, name, replacement)  # st.sidebar.x, column.x, container.x
            setattr(st, name, functools.partial(replacement, st._main))  # st.x
    # The app names its pages relative to its own file (app_pages/run.py); this one sits in
    # bench/, so every call that takes a page by its path is given the path from dashboard/.
    st.Page = _from_dashboard(st.Page, method=False)  # type: ignore[misc]
    st.switch_page = _from_dashboard(st.switch_page, method=False)
    if "widgets" not in MUTE:
        DeltaGenerator.page_link = _from_dashboard(DeltaGenerator.page_link,  # type: ignore
                                                   method=True)
        st.page_link = functools.partial(DeltaGenerator.page_link, st._main)
    if "nav" in MUTE:
        navigation = st.navigation
        st.navigation = lambda pages, **kwargs: navigation(  # type: ignore[misc]
            pages, **{**kwargs, "position": "hidden"})


def _from_dashboard(call: Callable[..., Any], method: bool) -> Callable[..., Any]:
    def with_page(*args: Any, **kwargs: Any) -> Any:
        args = list(args)
        at = 1 if method else 0  # after self, for DeltaGenerator.page_link
        if "page" in kwargs and isinstance(kwargs["page"], str):
            kwargs["page"] = str(DASHBOARD / kwargs["page"])
        elif len(args) > at and isinstance(args[at], str):
            args[at] = str(DASHBOARD / args[at])
        return call(*args, **kwargs)

    return with_page


# Streamlit runs this file again for every page run, in the same process: patch once.
if not getattr(st, "_bench_muted", False):
    _mute()
    st._bench_muted = True  # type: ignore[attr-defined]
runpy.run_path(str(DASHBOARD / "streamlit_app.py"), run_name="__main__")
