"""The flatteners' caches (converted attributes, resource and scope rows): dicts that every
receiver thread reads and fills, cleared whole when they reach their limit.

Reads take no lock, so a hit costs what a plain dict's costs: `get` and `in` are one C call
each, atomic under CPython's GIL (and under the dict's own lock on a free-threaded build), so a
reader sees an entry whole or not at all, and one that misses (the entry not stored yet, or
cleared a moment ago) converts the value itself, which gives the same entry. Writes take the
lock, so that the check of the size, the clear and the store are one step: without it, two
threads at the limit could each clear what the other had just stored, and the cache could grow
past its bound by one entry a thread. The value is built before the lock is taken (a build may
fill another of these caches), so threads that miss do not wait for one another's conversions.
"""

from __future__ import annotations

import threading
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict whose writes go through `put`, which clears it when it holds `limit` entries."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._lock = threading.Lock()

    def put(self, key: K, value: V) -> V:
        """Store `value` under `key` (clearing the cache first if it is full); return it."""
        with self._lock:
            if len(self) >= self.limit:
                self.clear()
            self[key] = value
        return value
