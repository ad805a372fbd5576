"""The soak of tests/long/soak.py, short (20 s) for CI: four paced exporters and the
dashboard's report queries in parallel against the receivers, writer and derivation as serve
wires them. Asserts correctness only (nothing lost, nothing duplicated, every dashboard round
answered); spans/s, latency and memory over time are printed, never asserted, because timing
on a shared CI machine would make the test flaky. Run tests/long/soak.py for minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.long.soak import soak

pytestmark = pytest.mark.slow  # 20 s of exporters by design


def test_short_soak_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rate, exporters, spans = 1500.0, 4, 128
    report = soak(20.0, rate, exporters, spans, sample_every=5.0, folder=tmp_path)
    print("\n" + "\n".join(report.lines(rate, exporters, spans)))
    assert report.requests >= 20, "the exporters barely sent anything"
    assert report.lost == 0 and report.duplicated == 0
    assert report.stored == report.acknowledged  # every request was resent until acknowledged
    assert report.dashboard_seconds and not report.dashboard_failures, report.dashboard_failures
