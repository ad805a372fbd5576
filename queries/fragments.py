"""Named SQL fragments composed into the query files at load time, so that a rule written in
many queries is written once (queries/sql/fragments/NAME.sql).

A query writes `/*@run_filter(start_ns)*/` where the run filter belongs; the fragment's
`{start}` becomes that column and `{agent}` the agent column of the same table (same
qualifier: `s.run_start_ns` gives `s.agent`). Only column names written in the query files
are put into the text (checked against a pattern); values stay bound parameters.
A fragment without arguments is written `/*@NAME*/` (`/*@exhausted_runs*/`, the body of a
CTE): its text goes in as it is, and the fragments it uses are composed in turn.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

FRAGMENT_FOLDER = Path(__file__).with_name("sql") / "fragments"
_USE = re.compile(r"/\*@run_filter\((?P<start>[a-z_]+(?:\.[a-z_]+)?)\)\*/")
_PLAIN = re.compile(r"/\*@(?P<name>[a-z_]+)\*/")


@cache
def _body(name: str) -> str:
    """A fragment's text without its comment lines (a header of sql_files' form)."""
    lines = (FRAGMENT_FOLDER / f"{name}.sql").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--"))


@cache
def _run_filter() -> str:
    return "(" + _body("run_filter").replace("\n", "\n  ") + ")"


def compose(text: str) -> str:
    """`text` with every `/*@run_filter(COLUMN)*/` replaced by the run filter on COLUMN and
    every `/*@NAME*/` by fragment NAME (itself composed)."""
    def substitute(found: re.Match[str]) -> str:
        start = found["start"]
        qualifier = start.rsplit(".", 1)[0] + "." if "." in start else ""
        return _run_filter().format(start=start, agent=qualifier + "agent")

    text = _PLAIN.sub(lambda found: compose(_body(found["name"])), text)
    return _USE.sub(substitute, text)
