"""The two log formats of `serve` (issue 6): one JSON object per line with the event's fields,
or one text line; the serve process test (test_serve_operations.py) reads the real stderr."""

from __future__ import annotations

import io
import json
import logging
import re

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
