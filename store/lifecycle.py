"""The one shape of everything that owns a thread: `start()`, `stop()`, `join(timeout)`, `name`.

- `start()` starts the owner's work (its thread, unless it needs it running earlier to bind a
  port: it says so);
- `stop()` asks the thread to end and returns at once: each owner says how it ends (what it
  finishes first), and a second call changes nothing;
- `join(timeout)` waits up to `timeout` seconds (None: as long as it takes) and answers whether
  the thread has ended: False when it did not end in time; True for one never started;
- `name` is the thread's name, as logging's `%(threadName)s`, a traceback from the thread
  ("Exception in thread budgetscope-writer") and a stack dump show it.

A protocol rather than a base class: the owners' threads run different things (a commit loop,
an asyncio loop, a paced schedule) built differently, so what they share is these four words
and the join below, not a constructor. It sits beside the store's rooms and imports none of
them, so every owner, the store's and ingest's receivers alike, may use it
(tests/project/test_layers.py).
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable


@runtime_checkable
class Lifecycle(Protocol):
    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...


def joined(thread: threading.Thread, timeout: float | None = None) -> bool:
    """Wait up to `timeout` seconds for `thread` to end; whether it has. True for a thread never
    started; from the thread itself, no wait (a thread cannot wait for its own end)."""
    if thread.ident is not None and thread is not threading.current_thread():
        thread.join(timeout)
    return not thread.is_alive()
