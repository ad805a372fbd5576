"""Start a page's longest read when the browser asks for the page's address, not when its
script gets there.

A first visit asks for the page's HTML, then spends a second or more loading Streamlit's client
before the websocket opens and the page's script runs; only then does the script start its
queries. For What if over all time on 35,000 runs, reading and preparing the replay's inputs
took 0.9–1.5 s more after that (dashboard/data.PREFETCHED names what is read ahead, per page).
Started on the HTML request instead, the read runs while the browser loads the client, and the
script finds it cached or waits for the rest: Streamlit computes a cached value once while other
callers of the same key wait for it (not in its documented API, so listed in
ground.INTERNALS; were it to compute again, the page would be slower, never wrong). Links open
pages this way: a shared link, the run view's "What if at a smaller cap".

Only an address that carries the filters (`range`, `since`, `until`, `agent`) is read ahead,
with the filters the page will read from it (dashboard/filters.from_params); without them the
page picks its range from the data, which is not guessed here. `PagePrefetch` is st.App
middleware inside the access guard, so only admitted requests start anything; one read at a
time, in one background thread, and only the newest request waits its turn, so that a client
asking for many addresses costs one read at a time and no queue.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from urllib.parse import parse_qsl

from dashboard.server.access import ASGIApp, Receive, Scope, Send, is_page, page_of

log = logging.getLogger(__name__)

# Pages with something to read ahead (the keys of dashboard/data.PREFETCHED, which imports
# Streamlit and so is imported only by the thread that reads).
PREFETCHED_PAGES = frozenset({"simulate"})


class Prefetcher:
    """One background thread reading ahead one (page, query) at a time with `read`
    (read_ahead); the newest offer replaces one not yet started."""

    def __init__(self, read: Callable[[str, str], object] | None = None) -> None:
        self._read = read or read_ahead
        self._wanted: tuple[str, str] | None = None
        self._reading = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def offer(self, page: str, query: str) -> None:
        with self._changed:
            self._wanted = (page, query)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="page-prefetch",
                                                daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def settled(self, timeout: float) -> bool:
        """Wait until nothing is offered or being read (at most `timeout` s); whether so."""
        with self._changed:
            return self._changed.wait_for(lambda: self._wanted is None and not self._reading,
                                          timeout)

    def _serve(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._wanted is not None)
                assert self._wanted is not None
                (page, query), self._wanted = self._wanted, None
                self._reading = True
            try:
                self._read(page, query)
            except Exception:  # noqa: BLE001 - only a head start; the page reports real errors
                log.debug("reading ahead for %s failed", page, exc_info=True)
            finally:
                with self._changed:
                    self._reading = False
                    self._changed.notify_all()


def read_ahead(page: str, query: str) -> object:
    """What `page` reads first (dashboard/data.PREFETCHED), read with the filters `query`
    names; None when it names none or `page` reads nothing ahead."""
    from dashboard import data
    from dashboard.filters import from_params, now_utc

    state, _ = from_params(dict(parse_qsl(query, keep_blank_values=True)))
    if state is None:
        return None
    return data.prefetch(page, state.filters(now_utc()))


class PagePrefetch:
    """ASGI middleware: a GET of a page in PREFETCHED_PAGES offers its query to `prefetcher`;
    every request then goes on unchanged."""

    def __init__(self, app: ASGIApp, prefetcher: Prefetcher | None = None) -> None:
        self.app = app
        self.prefetcher = prefetcher or Prefetcher()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "/")
        if scope["type"] == "http" and scope.get("method") == "GET" and is_page(path):
            page = page_of(path)
            if page in PREFETCHED_PAGES:
                self.prefetcher.offer(page, scope.get("query_string", b"").decode("latin-1"))
        await self.app(scope, receive, send)
