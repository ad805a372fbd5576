"""Lines a client can cause are paced: one per kind and period, standing for how many it held
back (ingest/receivers/log_pace.py); the receivers' rejections, and the libraries' lines the
commands put the pace on (budgetscope/log_format.py)."""

from __future__ import annotations

import logging

import pytest

from budgetscope.log_format import CLIENT_LOGGERS, pace_client_logs
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.log_pace import LogPace, PacedLogs


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_and_period_standing_for_the_rest() -> None:
    clock = Clock()
    pace = LogPace(period=10, clock=clock)
    assert pace.due("a") == 1
    assert [pace.due("a") for _ in range(5)] == [0] * 5
    assert pace.due("b") == 1  # another kind has its own period
    clock.now += 10
    assert pace.due("a") == 6  # itself and the five held back
    assert pace.due("a") == 0
    clock.now += 10
    assert pace.due("a", 7) == 8  # amounts (spans) add up: 7 and the one held back
    assert pace.due("a", 3) == 0
    clock.now += 11
    assert pace.due("a", 2) == 5


def test_the_filter_lets_one_record_through_and_says_how_many_it_stands_for() -> None:
    clock = Clock()
    paced = PacedLogs(LogPace(period=10, clock=clock))
    logger = logging.getLogger("tests.log_pace")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    logger.addHandler(keep)
    logger.addFilter(paced)
    try:
        for n in range(1000):
            logger.warning("Invalid HTTP request received from %s (%d%%)", "10.0.0.1", n)
        clock.now += 10
        logger.warning("Invalid HTTP request received from %s (%d%%)", "10.0.0.2", 7)
    finally:
        logger.removeFilter(paced)
        logger.removeHandler(keep)
    assert [record.getMessage() for record in records] == [
        "Invalid HTTP request received from 10.0.0.1 (0%)",
        "Invalid HTTP request received from 10.0.0.2 (7%) [and 999 more like this in the "
        "last 10 s]"]


def test_rejections_are_one_line_per_kind_and_period(caplog: pytest.LogCaptureFixture) -> None:
    counters = ReceiverCounters()
    with caplog.at_level(logging.WARNING, logger="budgetscope.receivers"):
        for _ in range(500):
            counters.refused("http", "127.0.0.1", "unauthenticated", "missing or wrong token")
        counters.refused("http", "127.0.0.1", "too_large", "request body exceeds the limit")
        for _ in range(50):
            counters.answered("grpc", "127.0.0.1", 1, {"bad_id": 2})
    events = [(record.event, getattr(record, "reason", None)) for record in caplog.records]
    assert events == [("request_rejected", "unauthenticated"),
                      ("request_rejected", "too_large"), ("spans_rejected", "bad_id")]
    # every one is still counted
    assert counters.snapshot()["requests_refused"][("http", "unauthenticated")] == 500
    assert counters.snapshot()["spans_rejected"][("grpc", "bad_id")] == 100


def test_the_commands_pace_the_loggers_a_client_can_make_speak() -> None:
    shared = pace_client_logs()
    try:
        assert pace_client_logs() is shared  # once, whoever calls it again
        for name in CLIENT_LOGGERS:
            assert [f for f in logging.getLogger(name).filters
                    if isinstance(f, PacedLogs)] == [shared], name
    finally:  # this test process's other tests read those loggers unpaced
        for name in CLIENT_LOGGERS:
            logging.getLogger(name).removeFilter(shared)
