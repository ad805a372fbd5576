"""At most one log line per period for each kind of line a client can cause, with a count.

A client decides how often a refusal, a malformed request or an accept() that fails for lack of
descriptors happens; if each made a line, a flood made a log that filled the disk unattended
(244 MB in 30 s, from two accept loops at a descriptor limit). `LogPace` lets the first line of
a kind through, holds back the others of that kind for `period` seconds, and lets the next one
through with how many it stands for. The counters (/metrics) still count every event.

- `LogPace.due(kind, amount)`: for code that logs its own lines (the receivers' rejections):
  0, say nothing now; N, log one line now standing for N (the amounts of this event and of
  those held back since the last line: requests, spans).
- `PacedLogs`: the same as a logging.Filter, for the lines of libraries a client can make speak
  (asyncio, tornado, uvicorn, grpc): installed on their loggers by the commands that serve
  (budgetscope/log_format.py). A line let through after others were held back ends with how
  many it stands for.

Thread-safe. What is held back is said by the next line of its kind; a kind that stops
happening leaves its last count to the counters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

# One line per kind at most this often.
LOG_PERIOD_SECONDS = 10.0
# Kinds remembered (the least recent forgotten first): a kind never holds client text, but the
# memory is bounded whatever the callers key by.
MOST_KINDS = 1024


class LogPace:
    def __init__(self, period: float = LOG_PERIOD_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.period = period
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()  # (last, held)

    def due(self, kind: Hashable, amount: int = 1) -> int:
        """0 when a line of `kind` was let through less than `period` ago (this event's
        `amount` is held back); else what this line stands for: its own amount and those held
        back since the last line (with the default amount, the events)."""
        with self._lock:
            now = self._clock()
            last, held = self._kinds.get(kind, (None, 0))
            if last is not None and now - last < self.period:
                self._kinds[kind] = (last, held + amount)
                return 0
            self._kinds[kind] = (now, 0)
            self._kinds.move_to_end(kind)
            while len(self._kinds) > MOST_KINDS:
                self._kinds.popitem(last=False)
            return held + amount


class PacedLogs(logging.Filter):
    """A logging.Filter pacing records by (logger, level, message template)."""

    def __init__(self, pace: LogPace | None = None) -> None:
        super().__init__()
        self.pace = pace or LogPace()

    def filter(self, record: logging.LogRecord) -> bool:
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        stands_for = self.pace.due((record.name, record.levelno, template))
        if not stands_for:
            return False
        if stands_for > 1:
            more = stands_for - 1
            # Appended to the text itself, after formatting, so that a `%` in either is inert.
            record.msg = (f"{record.getMessage()} [and {more} more like this in the last "
                          f"{self.pace.period:g} s]")
            record.args = None
            record.repeated = stands_for
        return True
