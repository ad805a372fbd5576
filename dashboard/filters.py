"""The dashboard's filters (time range and agent) and their place in the URL.

Every view is a shareable link: the filters live in the query string (`range=7d`, or
`range=custom&since=2026-11-23&until=2026-11-30`, plus `agent=...`), with the same meaning as
`budgetscope report --since/--until/--agent`: runs whose start s satisfies since <= s < until,
UTC. Streamlit clears the query string when the sidebar switches pages, so the app keeps the
last filters in session state and writes them back on every run.

This module holds the pure part (parsing, windows, URL params) and the small Streamlit glue that
moves values between the URL and the sidebar widgets; it reads no widgets inside cached code.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from queries.filters import FilterError, Filters, before, parse_instant

# token -> (label, length); presets end "now" (rounded up to the minute, so that results stay
# cacheable for a minute instead of changing key on every rerun).
PRESETS: dict[str, tuple[str, dt.timedelta | None]] = {
    "24h": ("Last 24 hours", dt.timedelta(hours=24)),
    "7d": ("Last 7 days", dt.timedelta(days=7)),
    "30d": ("Last 30 days", dt.timedelta(days=30)),
    "90d": ("Last 90 days", dt.timedelta(days=90)),
    "1w": ("Last full week", None),
    "4w": ("Last 4 full weeks", None),
    "all": ("All time", None),
    "custom": ("Custom (UTC)", None),
}
DEFAULT_PRESET = "7d"
# Whole ISO weeks (Monday 00:00 UTC to Monday), ending at the start of the current week: the weekly
# report's default, whose rows a rolling range would cut short (docs/metrics.md §7 partial_week).
FULL_WEEKS: dict[str, int] = {"1w": 1, "4w": 4}
FILTER_KEYS = ("range", "since", "until", "agent")


@dataclass(frozen=True)
class FilterState:
    """What the user chose. since/until are canonical ISO text (a date, or a UTC datetime
    ending in Z) and used only when preset is `custom`."""

    preset: str = DEFAULT_PRESET
    since: str | None = None
    until: str | None = None
    agent: str | None = None

    def window(self, now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
        if self.preset == "custom":
            return (parse_instant(self.since, "since") if self.since else None,
                    parse_instant(self.until, "until") if self.until else None)
        if self.preset in FULL_WEEKS:
            end = start_of_week(now)
            return end - dt.timedelta(weeks=FULL_WEEKS[self.preset]), end
        length = PRESETS[self.preset][1]
        if length is None:
            return None, None
        end = _ceil_minute(now)
        return end - length, end

    def filters(self, now: dt.datetime) -> Filters:
        since, until = self.window(now)
        return Filters(since, until, self.agent)

    def previous(self, now: dt.datetime) -> Filters | None:
        """The period of the same length just before, for "change against previous period";
        None when the range is open-ended."""
        since, until = self.window(now)
        if since is None or until is None:
            return None
        return Filters(before(since, until - since), since, self.agent)

    def query_params(self) -> dict[str, str]:
        params = {"range": self.preset}
        if self.preset == "custom":
            if self.since:
                params["since"] = self.since
            if self.until:
                params["until"] = self.until
        if self.agent:
            params["agent"] = self.agent
        return params

    def label(self, now: dt.datetime) -> str:
        since, until = self.window(now)
        if since is None and until is None:
            span = "all time"
        else:
            span = (f"{_show(since) if since else 'the beginning'} → "
                    f"{_show(until) if until else 'now'}")
        return span + (f" · agent {self.agent}" if self.agent else " · all agents")


def start_of_week(now: dt.datetime) -> dt.datetime:
    """Monday 00:00 UTC of the ISO week `now` is in."""
    day = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - dt.timedelta(days=day.weekday())


def _ceil_minute(now: dt.datetime) -> dt.datetime:
    floor = now.astimezone(dt.UTC).replace(second=0, microsecond=0)
    return floor if floor == now else floor + dt.timedelta(minutes=1)


def _show(value: dt.datetime) -> str:
    if value.hour == value.minute == value.second == 0:
        return value.strftime("%Y-%m-%d")
    return value.strftime("%Y-%m-%d %H:%M UTC")


def canonical_instant(text: str, option: str) -> str:
    """A URL since/until value as canonical text: `2026-11-23` stays a date; a datetime becomes
    UTC with a Z. Raises FilterError."""
    text = text.strip()
    value = parse_instant(text, option)
    if len(text) == 10:  # a bare date: keep it a date, as the CLI shows it
        return value.date().isoformat()
    return value.strftime("%Y-%m-%dT%H:%M:%S") + (
        f".{value.microsecond:06d}" if value.microsecond else "") + "Z"


def from_params(params: Mapping[str, str]) -> tuple[FilterState | None, list[str]]:
    """Filters from a query string; None when it names none. Bad values are dropped with a
    message each, so a mistyped link still opens."""
    if not any(key in params for key in FILTER_KEYS):
        return None, []
    problems: list[str] = []
    preset = params.get("range") or ("custom" if ("since" in params or "until" in params)
                                     else DEFAULT_PRESET)
    if preset not in PRESETS:
        problems.append(f"unknown range {preset!r}; using {PRESETS[DEFAULT_PRESET][0]}")
        preset = DEFAULT_PRESET
    since = until = None
    if preset == "custom":
        for key in ("since", "until"):
            raw = params.get(key)
            if not raw:
                continue
            try:
                value = canonical_instant(raw, key)
            except FilterError as error:
                problems.append(str(error))
                continue
            if key == "since":
                since = value
            else:
                until = value
        if since and until and parse_instant(since, "since") >= parse_instant(until, "until"):
            problems.append(f"since {since} is not before until {until}; ignoring until")
            until = None
    agent = params.get("agent") or None
    return FilterState(preset, since, until, agent), problems


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
