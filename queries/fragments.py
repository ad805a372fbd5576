"""Named SQL fragments composed into the query files at load time, so that a rule written in
many queries is written once (queries/sql/fragments/NAME.sql).

A query writes `/*@run_filter(start_ns)*/` where the fragment belongs; the fragment's
`{start}` becomes that column and `{agent}` the agent column of the same table (same
qualifier: `s.run_start_ns` gives `s.agent`). Only column names written in the query files
are put into the text (checked against a pattern); values stay bound parameters.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

FRAGMENT_FOLDER = Path(__file__).with_name("sql") / "fragments"
_USE = re.compile(r"/\*@run_filter\((?P<start>[a-z_]+(?:\.[a-z_]+)?)\)\*/")


@cache
def _run_filter() -> str:
    lines = (FRAGMENT_FOLDER / "run_filter.sql").read_text(encoding="utf-8").splitlines()
    body = [line for line in lines if not line.lstrip().startswith("--")]
    return "(" + "\n  ".join(body) + ")"


def compose(text: str) -> str:
    """`text` with every `/*@run_filter(COLUMN)*/` replaced by the fragment."""
    def substitute(found: re.Match[str]) -> str:
        start = found["start"]
        qualifier = start.rsplit(".", 1)[0] + "." if "." in start else ""
        return _run_filter().format(start=start, agent=qualifier + "agent")

    return _USE.sub(substitute, text)
