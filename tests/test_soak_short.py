"""The soak of bench/soak.py, short (20 s) for CI (issue 6): four paced exporters and the
dashboard's report queries in parallel against the receivers, writer and derivation as serve
wires them. Asserts correctness only (nothing lost, nothing duplicated, every dashboard round
answered); spans/s, latency and memory over time are printed, never asserted, because timing
on a shared CI machine would make the test flaky. Run bench/soak.py for minutes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parent.parent / "bench" / "soak.py"


def _soak_module():  # noqa: ANN202 - a module object
    spec = importlib.util.spec_from_file_location("budgetscope_bench_soak", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_short_soak_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    soak = _soak_module()
    rate, exporters, spans = 1500.0, 4, 128
    report = soak.soak(20.0, rate, exporters, spans, sample_every=5.0, folder=tmp_path)
    print("\n" + "\n".join(report.lines(rate, exporters, spans)))
    assert report.requests >= 20, "the exporters barely sent anything"
    assert report.lost == 0 and report.duplicated == 0
    assert report.stored == report.acknowledged  # every request was resent until acknowledged
    assert report.dashboard_seconds and not report.dashboard_failures, report.dashboard_failures
