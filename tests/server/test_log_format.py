"""The two log formats of `serve`: one JSON object per line with the event's fields,
or one text line; the serve process test (test_serve_operations.py) reads the real stderr."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from budgetscope.log_format import PRODUCT_LOGGERS, configure_logging


def _emit(log_format: str) -> str:
    stream = io.StringIO()
    handler = configure_logging(log_format, stream)
    try:
        logging.getLogger("ingest.somewhere").warning(
            "refused %d spans", 3, extra={"event": "spans_rejected", "peer": "127.0.0.1",
                                           "spans": 3, "reason": "bad\nid \"x\""})
        logging.getLogger("budgetscope.serve").debug("below INFO: not written")
        logging.getLogger("unrelated.library").warning("not ours: not written here")
    finally:
        for name in PRODUCT_LOGGERS:
            logger = logging.getLogger(name)
            logger.removeHandler(handler)
            logger.propagate = True
            logger.setLevel(logging.NOTSET)
    return stream.getvalue()


def test_json_lines_carry_the_event_and_its_fields() -> None:
    lines = _emit("json").splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record.pop("ts"))
    assert record == {"level": "warning", "logger": "ingest.somewhere",
                      "event": "spans_rejected", "message": "refused 3 spans",
                      "peer": "127.0.0.1", "spans": 3, "reason": "bad\nid \"x\""}


def test_text_lines() -> None:
    text = _emit("text")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ WARNING ingest.somewhere: "
                        r"refused 3 spans\n", text), text


@pytest.mark.slow
def test_ingest_log_format_json_keeps_stderr_json_only(tmp_path: Path) -> None:
    trace = tmp_path / "two.json"
    span = ('{{"traceId":"{t}","spanId":"{s}","name":"{n}",'
            '"startTimeUnixNano":"1764000000000000000","endTimeUnixNano":"1764000001000000000"}}')
    trace.write_text('{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join([
        span.format(t="0af7651916cd43dd8448eb211c80319c", s="b7ad6b7169203331", n="ok"),
        span.format(t="0af7", s="b7ad6b7169203332", n="short id")]) + "]}]}]}\n")
    db = tmp_path / "ingest.duckdb"
    process = subprocess.run(
        [sys.executable, "-c", "from budgetscope.cli import main; main()", "--db", str(db),
         "ingest", "--no-progress", "--log-format", "json", str(trace)],
        capture_output=True, text=True, timeout=120)
    assert process.returncode == 1, process.stderr
    assert process.stdout.startswith("1 file(s): 1 spans loaded, 0 already present, 1 rejected")
    events = [json.loads(line) for line in process.stderr.splitlines()]
    assert [e["event"] for e in events] == ["rejected", "ingested"]
    assert (events[0]["reason"], events[0]["count"], events[0]["spans"]) == ("bad_id", 1, 1)
    assert "trace_id is 2 bytes, must be 16" in events[0]["examples"][0]
    assert (events[1]["spans_loaded"], events[1]["spans_rejected"]) == (1, 1)
    # of the load's seconds, those spent deriving its runs and steps
    assert 0 < events[1]["derive_seconds"] <= events[1]["seconds"]
