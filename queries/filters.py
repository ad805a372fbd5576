"""Report filters: which runs a report covers.

A run is in the filter when its start s satisfies since <= s < until (since inclusive, until
exclusive, both UTC) and its agent equals `agent` when one is given. Steps, writes and failures
follow their run: a step is counted in the week and filter of the run it belongs to.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


class FilterError(ValueError):
    """A filter value that cannot be used, with a message fit for one line."""


# Run starts are nanoseconds since 1970 in 64-bit integers: from 1677-09-21 to 2262-04-11. A
# bound beyond them holds every run or none, so it is bound as the nearest instant that fits:
# `--since 0001-01-01` used to overflow the query's parameter (an HTTP 500 from the read API,
# a traceback on the file), and `check --until 0001-01-02` the window's start.
_MIN_NS, _MAX_NS = -(2**63) + 1, 2**63 - 1
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)


def parse_instant(text: str, option: str) -> dt.datetime:
    """An ISO 8601 date (midnight UTC) or datetime (UTC when no offset is given) → aware UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise FilterError(f"{option}: {text!r} is not an ISO date or datetime "
                          "(e.g. 2026-11-23 or 2026-11-23T08:00:00Z)") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first instant there is
        raise FilterError(f"{option}: {text!r} is outside the years 1 to 9999 in UTC") from None


def before(moment: dt.datetime, length: dt.timedelta) -> dt.datetime:
    """`moment - length`, or the earliest instant there is when that is before the year 1."""
    try:
        return moment - length
    except OverflowError:
        return _EARLIEST


def epoch_ns(value: dt.datetime | None) -> int | None:
    """Nanoseconds since 1970, within the 64 bits a run's start is stored in (see _MIN_NS)."""
    if value is None:
        return None
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    ns = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000
    return min(_MAX_NS, max(_MIN_NS, ns))


@dataclass(frozen=True)
class Filters:
    """Runs that started in [since, until), UTC, either bound open when None; optionally one
    agent. Reports, the headline numbers and `check`'s window all take this."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    agent: str | None = None

    @classmethod
    def ending(cls, until: dt.datetime, length: dt.timedelta, agent: str | None = None
               ) -> Filters:
        """The `length` before `until`: `check`'s and /metrics' recent window."""
        return cls(before(until, length), until, agent)

    @classmethod
    def parse(cls, since: str | None = None, until: str | None = None,
              agent: str | None = None) -> Filters:
        filters = cls(parse_instant(since, "--since") if since else None,
                      parse_instant(until, "--until") if until else None,
                      agent or None)
        if filters.since and filters.until and filters.since >= filters.until:
            raise FilterError(f"--since {since} is not before --until {until}: no run can match")
        return filters

    def parameters(self) -> dict[str, Any]:
        return {"since_ns": epoch_ns(self.since), "until_ns": epoch_ns(self.until),
                "agent": self.agent}
