"""What the database holds, in the sidebar, and the page kept current with it: redrawn when
spans arrive ("Follow new spans"), and when the file a writer held can be read again, with a
note above the page meanwhile."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import config, data, fmt

_FOLLOW = "follow_new_spans"  # the sidebar toggle
_DRAWN_FROM = "_drawn_from_source"  # data.source_token() when the page was last drawn
# How often a page that could not open the file checks whether it can again.
HELD_RETRY_SECONDS = 2.0


def sidebar_status(status: data.DatabaseStatus) -> None:
    """The sidebar's box: the file, its spans and runs, the newest of each, traces that failed
    to derive, and the controls that follow new spans and reload."""
    box = st.sidebar.container(border=True)
    box.caption("Database")
    box.text(status.path + ("  (served by this process)" if status.serving else ""))
    lines = [f"spans  {status.spans:,}", f"runs   {status.runs:,}"]
    if status.newest_run_start:
        lines.append(f"newest run started\n  {status.newest_run_start[:19].replace('T', ' ')} UTC")
    if status.newest_received is not None:
        lines.append("newest span received\n  "
                     + status.newest_received.strftime("%Y-%m-%d %H:%M:%S UTC"))
    box.text("\n".join(lines))
    if status.traces_failed_derivation:
        box.warning(f"{status.traces_failed_derivation:,} trace(s) could not be derived: their "
                    "spans are stored, but their runs and steps stay as last derived (or are "
                    "missing). New spans of a trace retry it; the errors are in the log.")
    seconds = config.current().refresh_seconds
    if seconds:
        box.toggle("Follow new spans", value=True, key=_FOLLOW,
                   help=f"Checks the database every {seconds:g} s and redraws the page when "
                        "spans arrived or were derived (reading nothing when they did not).")
    box.button("Reload data", key="reload", on_click=data.clear_cache, icon=":material/refresh:",
               help="Forget every cached result and query the database again.")


def follow_new_data() -> None:
    """Redraw the whole page when the database changes after this point of the run.

    Called before the page reads anything, so that a change during the reads (or a read that
    failed because `budgetscope ingest` held the file) brings another redraw. A fragment on a
    timer only stats the database file and its WAL (data.source_token, no query), so an idle
    dashboard costs nothing; the page's queries rerun only when that token moved."""
    seconds = config.current().refresh_seconds
    if not seconds or not st.session_state.get(_FOLLOW, True):
        return
    st.session_state[_DRAWN_FROM] = data.source_token()

    @st.fragment(run_every=seconds)
    def watch() -> None:
        if data.source_token() != st.session_state.get(_DRAWN_FROM):
            st.rerun(scope="app")

    watch()


def say_held(where: Any) -> bool:
    """When this run could not open the file (data.held): say so in `where`, above the page,
    and redraw the page by itself as soon as the file can be read again. True when said."""
    held = data.held()
    if held is None:
        return False
    shown = ("" if held.shown_from is None else " Showing results read at "
             + held.shown_from.strftime("%H:%M:%S UTC") + ".")
    where.info(fmt.escape_md(f"The database file is busy: {held.reason}{shown} This page "
                             "redraws by itself once the file can be read again."),
               icon=":material/hourglass_top:")
    with where:
        redraw_when_readable()
    return True


def redraw_when_readable() -> None:
    """A timer that redraws the page once the file can be opened again: whatever
    --refresh-seconds and "Follow new spans" say, a page that could not read recovers."""
    @st.fragment(run_every=HELD_RETRY_SECONDS)
    def wait_for_the_file() -> None:
        if data.file_readable():
            st.rerun(scope="app")

    wait_for_the_file()

