"""A thread pool that refuses work beyond a bound instead of queueing it without end: the read
API's calls (a report may take seconds) wait in it, never in the pools of exports or pages."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class PoolFull(RuntimeError):
    """As many calls as the pool takes are running or waiting: the caller answers 503."""


class BoundedPool:
    def __init__(self, threads: int, most_waiting: int, name: str) -> None:
        self.limit = threads + most_waiting
        self._slots = threading.BoundedSemaphore(self.limit)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=name)

    def submit(self, work: Callable[..., Any], *arguments: Any) -> Future:
        """Raises PoolFull when `limit` calls are taken, RuntimeError once shut down."""
        if not self._slots.acquire(blocking=False):
            raise PoolFull(f"{self.limit} calls are running or waiting (the most at once)")
        try:
            future = self._executor.submit(work, *arguments)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return future

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
