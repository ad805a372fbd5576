"""The ingest progress bar: silent for quick loads and pipes, drawn in place otherwise."""

from __future__ import annotations

import io
import time

from ingest.files.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_quick_load_draws_nothing() -> None:
    out = _Terminal()
    bar = Progress(1000, out, delay=60)
    bar.update(500, 10)
    bar.close()
    assert out.getvalue() == ""


def test_a_pipe_gets_no_bar_unless_forced() -> None:
    out = io.StringIO()
    bar = Progress(1000, out, delay=0)
    bar.update(500, 10)
    assert out.getvalue() == ""
    forced = Progress(1000, out, delay=0, force=True)
    forced.update(500, 10)
    assert "50%" in out.getvalue()


def test_a_slow_load_draws_fraction_size_and_rate_in_place() -> None:
    out = _Terminal()
    bar = Progress(4_000_000, out, delay=0)
    bar.update(1_000_000, 2_500)
    time.sleep(0.25)  # redraws are at most five a second
    bar.update(3_000_000, 7_500)
    bar.close()
    text = out.getvalue()
    assert text.startswith("\r[")
    assert " 25%  1.0 MB / 4.0 MB  2,500 spans" in text
    assert " 75%  3.0 MB / 4.0 MB  7,500 spans" in text
    assert text.endswith("\n")
