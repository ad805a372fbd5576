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


def parse_instant(text: str, option: str) -> dt.datetime:
    """An ISO 8601 date (midnight UTC) or datetime (UTC when no offset is given) → aware UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise FilterError(f"{option}: {text!r} is not an ISO date or datetime "
                          "(e.g. 2026-11-23 or 2026-11-23T08:00:00Z)") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def epoch_ns(value: dt.datetime | None) -> int | None:
    if value is None:
        return None
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000


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
        return cls(until - length, until, agent)

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
