"""Durations on the command line (`90s`, `30m`, `1h`, `7d`, `2w`), and a window's length named
the same way, as the CLI and /metrics label it."""

from __future__ import annotations

import datetime as dt
import re

import click

_DURATION = re.compile(r"^\s*(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def parse_duration(text: str) -> dt.timedelta:
    """'7d' → 7 days. Raises ValueError naming the accepted forms."""
    match = _DURATION.match(text)
    if match is None or float(match["amount"]) <= 0:
        raise ValueError(f"{text!r} is not a positive duration such as 90s, 30m, 1h, 7d or 2w")
    try:
        return dt.timedelta(seconds=float(match["amount"]) * _UNITS[match["unit"]])
    except OverflowError:  # past timedelta's 999,999,999 days
        raise ValueError(f"{text!r} is longer than any window there can be") from None


class Duration(click.ParamType):
    """A click option type for parse_duration; `zero`: also `0` (none at all)."""

    name = "DURATION"

    def __init__(self, zero: bool = False) -> None:
        self.zero = zero

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        if self.zero and str(value).strip() in ("0", "0s"):
            return dt.timedelta(0)
        try:
            return parse_duration(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def window_label(length: dt.timedelta) -> str:
    """A window's length as the CLI and /metrics name it: `7d`, `24h`, `90m`, `45s`."""
    seconds = int(length.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
