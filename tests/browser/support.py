"""Where bench/bench_dashboard.py, bench_browser_floor.py and bench_page_elements.py still find
the dashboard subprocess, until the dashboard server branch's rewrite of those files lands: they
then import bench.support.browser (the same names), and this file goes with them
(tests/test_lanes.py, AWAITING_MERGE). Tests import tests.support.ui."""

from bench.support.browser import PAGE_DRAWN, Dashboard, free_port

__all__ = ["PAGE_DRAWN", "Dashboard", "free_port"]
