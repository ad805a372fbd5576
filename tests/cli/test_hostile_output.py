"""What the product writes from span data is inert where it lands:
CSV cells a spreadsheet would run as formulas get a leading `'` (OWASP) and a carriage return
inside a cell is quoted; text for a terminal (`run`, `report --format table`, log lines)
carries no escape sequence or control character."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.log_format import configure_logging
from queries.terminal import terminal_safe
from tests.support.hostile_names import ESCAPES, FORMULAS, SPLIT, hostile_names_db
from tests.support.trace_builder import open_db

# Anything a terminal acts on: C0 but the line feed, DEL, C1, bidi overrides.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _invoke(*args: str) -> bytes:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


@pytest.mark.slow
@pytest.mark.parametrize("report", ["weekly", "runs", "failures", "attribution",
                                    "reconciliation"])
def test_csv_cells_never_start_a_formula(tmp_path: Path, report: str) -> None:
    db, _ = hostile_names_db(tmp_path)
    data = _invoke("--db", db, "report", report, "--since", "2026-01-01")
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    header, body = rows[0], rows[1:]
    texts = [value for row in body for value in row]
    for value in texts:
        assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (report, value)
    # The names are all there, neutralised and otherwise unchanged.
    name_column = "agent" if report in ("weekly", "runs") else "step_key"
    names = [row[header.index(name_column)] for row in body]
    for name in FORMULAS:
        shown = name if report in ("weekly", "runs") else f"tool:{name}"
        assert ("'" + shown if shown[0] in "=+-@\t\r" else shown) in names, (report, names)


def test_a_carriage_return_in_a_cell_does_not_split_its_row(tmp_path: Path) -> None:
    db, run_ids = hostile_names_db(tmp_path)
    data = _invoke("--db", db, "report", "runs", "--since", "2026-01-01")
    # A spreadsheet (and Python's csv module) ends a row at an unquoted CR: one row per run.
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    assert len(rows) == 1 + len(run_ids)
    assert SPLIT in [row[1] for row in rows]
    assert f'"{SPLIT}"'.encode() in data


def test_numbers_stay_numbers_negative_ones_too() -> None:
    import pandas as pd

    from queries.render import to_csv_bytes

    frame = pd.DataFrame({"agent": ["-1", "a"], "overrun_ms": [-1.5, 2.0], "delta": [-3, 4]})
    assert to_csv_bytes(frame) == b"agent,overrun_ms,delta\n'-1,-1.500,-3\na,2.000,4\n"


def test_the_dashboard_download_is_the_cli_bytes_with_hostile_names(tmp_path: Path) -> None:
    from queries import reports
    from queries.filters import Filters
    from queries.render import to_csv_bytes

    db, _ = hostile_names_db(tmp_path)
    cli_bytes = _invoke("--db", db, "report", "weekly")
    con = open_db(tmp_path)
    try:  # what dashboard/app_pages/weekly.py hands to st.download_button
        assert to_csv_bytes(reports.weekly(con, Filters.parse(None, None, None))) == cli_bytes
    finally:
        con.close()


@pytest.mark.slow
def test_run_summary_writes_no_control_characters(tmp_path: Path) -> None:
    db, run_ids = hostile_names_db(tmp_path)
    for run_id in run_ids:
        text = _invoke("--db", db, "run", run_id).decode("utf-8")
        assert not CONTROL.search(text), repr(text)
        assert "\x1b" not in text
    text = _invoke("--db", db, "run", run_ids[-1]).decode("utf-8")
    assert "link" in text  # the printable part of the name is still shown
    # wide enough that nothing wraps: a line break from the name would add a line
    wide = _invoke("--db", db, "run", run_ids[-1], "--width", "400").decode("utf-8")
    assert len(wide.splitlines()) == len(_invoke("--db", db, "run", run_ids[0], "--width",
                                                 "400").splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("report", ["runs", "weekly", "failures", "reconciliation"])
def test_table_format_writes_no_control_characters(tmp_path: Path, report: str) -> None:
    db, run_ids = hostile_names_db(tmp_path)
    text = _invoke("--db", db, "report", report, "--format", "table").decode("utf-8")
    assert not CONTROL.search(text), repr(text)
    if report == "runs":
        # header, rule, one line a run (a CR in a name splits none), then the note naming the
        # columns 80 characters leave out
        lines = text.splitlines()
        rows, note = lines[2:2 + len(run_ids)], " ".join(lines[2 + len(run_ids):])
        assert sorted(next(i for i in run_ids if i.startswith(row.split()[0])) for row in rows
                      ) == sorted(run_ids), rows
        assert note.startswith("(") and note.endswith(")") and "more column" in note, note


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_log_lines_echoing_span_data_are_inert(log_format: str) -> None:
    stream = io.StringIO()
    configure_logging(log_format, stream)
    logging.getLogger("ingest.receivers.test").warning(
        "rejected span %s", ESCAPES, extra={"event": "spans_rejected", "detail": ESCAPES})
    line = stream.getvalue()
    assert not CONTROL.search(line.rstrip("\n")), repr(line)
    if log_format == "json":  # the same value, escaped, for a log pipeline
        assert json.loads(line)["detail"] == ESCAPES


@pytest.mark.parametrize(("raw", "shown"), [
    ("a\x1b[31mred\x1b[0m", "ared"),
    ("\x1b]0;title\x07x", "x"),
    ("\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("ab\rcd", "ab cd"),
    ("a\x9b2Jb", "ab"),
    ("x\u202egnp.exe", "x\ufffdgnp.exe"),
    ("nul\x00bell\x07", "nul\ufffdbell\ufffd"),
    ("unterminated\x1b]0;rest", "unterminated0;rest"),
])
def test_terminal_safe(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


# plotly.js src/lib/svg_text_utils.js, convertEntities: numeric references and these names.
_PLOTLY_ENTITIES = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×",
                    "plusmn": "±", "deg": "°"}
_PLOTLY_ENTITY = re.compile(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);")


def _plotly_shows(label: str) -> str:
    def convert(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner.startswith("#"):
            return chr(int(inner[2:], 16) if inner[1] == "x" else int(inner[1:]))
        return _PLOTLY_ENTITIES.get(inner, match.group(0))

    return _PLOTLY_ENTITY.sub(convert, label)


@pytest.mark.parametrize("name", ['say "hi"', "it's", "a & b", "<b>x</b>", "&quot;", "&amp;"])
def test_chart_labels_show_the_name_as_typed(name: str) -> None:
    from dashboard import fmt

    label = fmt.plot_text(name)
    assert "<" not in label and ">" not in label  # no tag can open: nothing becomes markup
    assert _plotly_shows(label) == name


def test_json_report_is_inert_on_a_terminal_and_keeps_the_values(tmp_path: Path) -> None:
    db, _ = hostile_names_db(tmp_path)
    text = _invoke("--db", db, "report", "runs", "--format", "json").decode("utf-8")
    assert not CONTROL.search(text.replace("\n", "")), repr(text)
    assert ESCAPES in [row["agent"] for row in json.loads(text)]
