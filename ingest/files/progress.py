"""A progress bar on stderr for loads that take more than a moment, and nothing otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _megabytes(count: int) -> str:
    return f"{count / 1e6:,.1f} MB"


class Progress:
    """Draws `[#####.....]  45%  12.3 / 27.0 MB  123,456 spans  45,678 spans/s`, in place.

    Stays silent for the first `delay` seconds (a quick load needs no bar) and when the stream
    is not a terminal (logs and pipes get the summary only), unless forced."""

    def __init__(self, total_bytes: int, stream: TextIO | None = None, *, delay: float = 1.0,
                 force: bool | None = None, width: int = 30) -> None:
        self.total = max(total_bytes, 1)
        self.stream = stream or sys.stderr
        self.enabled = force if force is not None else self.stream.isatty()
        self.delay = delay
        self.width = width
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def update(self, done_bytes: int, spans: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.delay or now - self.last_draw < 0.2:
            return
        self.last_draw = now
        fraction = min(done_bytes / self.total, 1.0)
        filled = int(fraction * self.width)
        rate = spans / max(now - self.started, 1e-9)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r[{bar}] {fraction:4.0%}  {_megabytes(done_bytes)} / "
                          f"{_megabytes(self.total)}  {spans:,} spans  {rate:,.0f} spans/s ")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
