"""PagePrefetch (dashboard/server/page_prefetch.py): asking for What if's address starts the
page's longest read, with the filters the page will read from the same address, in one
background thread; nothing else starts anything, and every request goes on unchanged."""

from __future__ import annotations

import asyncio
import threading

from dashboard import data
from dashboard.server.access import Message, Receive, Scope, Send
from dashboard.server.page_prefetch import (
    PREFETCHED_PAGES,
    PagePrefetch,
    Prefetcher,
    read_ahead,
)
from queries.filters import Filters, parse_instant
from simulation.replay import Prepared


class Recorded:
    """A read that records what it was asked for; `gate`, when given, holds every read until
    it is set."""

    def __init__(self, gate: threading.Event | None = None, fail_first: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.gate, self.fail_first = gate, fail_first

    def __call__(self, page: str, query: str) -> None:
        self.calls.append((page, query))
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail_first and len(self.calls) == 1:
            raise RuntimeError("the file is held")


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"page"})


def call(app: PagePrefetch, path: str, query: bytes = b"", method: str = "GET",
         kind: str = "http") -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": kind, "method": method, "path": path, "query_string": query,
             "headers": [(b"host", b"127.0.0.1")]}
    asyncio.run(app(scope, receive, send))
    return sent


def test_what_ifs_address_starts_its_read_with_the_addresss_query() -> None:
    read = Recorded()
    prefetcher = Prefetcher(read)
    app = PagePrefetch(ok, prefetcher)
    sent = call(app, "/simulate", b"range=all")
    assert sent[-1]["body"] == b"page"  # the request itself goes on unchanged
    assert prefetcher.settled(10)
    call(app, "/under/a/base/simulate/", b"range=custom&since=2026-11-01&agent=billing-agent")
    assert prefetcher.settled(10)
    assert read.calls == [("simulate", "range=all"),
                          ("simulate", "range=custom&since=2026-11-01&agent=billing-agent")]


def test_nothing_else_starts_a_read() -> None:
    read = Recorded()
    prefetcher = Prefetcher(read)
    app = PagePrefetch(ok, prefetcher)
    for path, method, kind in (("/runs", "GET", "http"), ("/", "GET", "http"),
                               ("/simulate", "POST", "http"), ("/simulate", "HEAD", "http"),
                               ("/static/js/simulate", "GET", "http"),
                               ("/_stcore/health", "GET", "http")):
        sent = call(app, path, b"range=all", method, kind)
        assert sent[-1]["body"] == b"page", path
    assert prefetcher.settled(10)
    assert read.calls == []


def test_the_newest_address_replaces_one_not_yet_started() -> None:
    """A client asking for many addresses costs one read at a time and no queue."""
    gate = threading.Event()
    read = Recorded(gate)
    prefetcher = Prefetcher(read)
    prefetcher.offer("simulate", "range=7d")
    for _ in range(100):  # until the first read has started
        if read.calls:
            break
        threading.Event().wait(0.01)
    for query in ("range=30d", "range=90d", "range=all"):
        prefetcher.offer("simulate", query)
    gate.set()
    assert prefetcher.settled(10)
    assert read.calls == [("simulate", "range=7d"), ("simulate", "range=all")]


def test_a_failed_read_leaves_the_thread_reading() -> None:
    read = Recorded(fail_first=True)
    prefetcher = Prefetcher(read)
    prefetcher.offer("simulate", "range=all")
    assert prefetcher.settled(10)
    prefetcher.offer("simulate", "range=7d")
    assert prefetcher.settled(10)
    assert read.calls == [("simulate", "range=all"), ("simulate", "range=7d")]


def test_the_read_ahead_is_the_pages_own_read(db: str) -> None:
    """What read_ahead reads is what the page then asks for: the same cached object, with
    the filters from the same address."""
    ahead = read_ahead("simulate", "range=all")
    assert isinstance(ahead, Prepared) and ahead.n_runs > 0
    assert data.simulation_inputs(Filters()) is ahead
    query = "range=custom&since=2026-11-02&until=2026-11-09"
    ahead = read_ahead("simulate", query)
    since, until = parse_instant("2026-11-02", "since"), parse_instant("2026-11-09", "until")
    assert data.simulation_inputs(Filters(since, until)) is ahead


def test_an_address_without_filters_or_a_page_without_a_read_reads_nothing(db: str) -> None:
    assert read_ahead("simulate", "") is None
    assert read_ahead("simulate", "cap.tool%3Afetch=2") is None
    assert read_ahead("runs", "range=all") is None


def test_the_pages_read_ahead_are_the_ones_data_reads() -> None:
    assert frozenset(data.PREFETCHED) == PREFETCHED_PAGES
