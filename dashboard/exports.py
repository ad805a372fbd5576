"""What an export is called and the command line that gives the same bytes."""

from __future__ import annotations

import datetime as dt
import re
import shlex

from queries.filters import Filters


def _instant(value: dt.datetime) -> str:
    """A date when the instant is midnight UTC (as people type it), else ISO with Z."""
    if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
        return value.date().isoformat()
    return value.isoformat().replace("+00:00", "Z")


def cli_command(report: str, filters: Filters, db: str, *options: str) -> str:
    """`budgetscope report REPORT` with these filters (same meaning: since inclusive, until
    exclusive, UTC) and the report's own `options` (`--dimension tokens`)."""
    parts = ["budgetscope", "--db", db, "report", report, *options]
    if filters.since is not None:
        parts += ["--since", _instant(filters.since)]
    if filters.until is not None:
        parts += ["--until", _instant(filters.until)]
    if filters.agent:
        parts += ["--agent", filters.agent]
    return shlex.join(parts)


def csv_file_name(report: str, filters: Filters) -> str:
    parts = ["budgetscope", report]
    if filters.since is not None:
        parts.append(filters.since.strftime("%Y%m%dT%H%M"))
    if filters.until is not None:
        parts.append(filters.until.strftime("%Y%m%dT%H%M"))
    if filters.agent:
        parts.append(re.sub(r"[^A-Za-z0-9_.-]+", "_", filters.agent)[:40])
    return "-".join(parts) + ".csv"
