"""Numbers for people: durations, percentages, counts and instants, one way everywhere.

The dashboard (through dashboard/fmt.py) and the terminal output (`budgetscope run`, `report
--format table`) both format with these functions, so a figure reads the same in both. CSV and
JSON keep raw values (docs/metrics.md §7): these are for eyes, not for spreadsheets.

Rules:
- a value that is not there (None, NaN, NaT) is always NO_VALUE, an en dash;
- durations pick the unit a person reads best and stay short enough for a metric tile:
  `850 ms`, `12.3 s`, `60.0 s`, `1 min 12 s`, `2 h 03 min`;
- percentages have one decimal everywhere (`31.9%` beside `1.1%`, never ragged);
- dollars are exact, with cents at least (`$0.50`, `$0.0123`, `$2.00`; the reports' CSV and
  JSON write `0.5`, `2`), and `≥` before a cost that is only a lower bound (docs/metrics.md
  §11.4); a headline total is rounded for reading (`usd_headline`: `$28.10`, `$0.0983`), its
  exact amount beside it in the tile's help.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from typing import Any

import pandas as pd

from queries.money import dollar_text, dollars
from queries.words import plural as plural  # its home, pandas-free, for the CLI's light commands

NO_VALUE = "–"


def missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def duration(ms: Any) -> str:
    """Milliseconds in the unit a person reads best: 850 ms, 12.3 s, 60.0 s, 1 min 30 s,
    2 h 03 min. Up to a minute in seconds with one decimal (a 60 s budget reads "60.0 s", not
    "1 min 0 s"); past it whole seconds, which is all a minute-long span needs."""
    if missing(ms):
        return NO_VALUE
    value = float(ms)
    if math.isinf(value):
        return NO_VALUE
    sign = "−" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return "0 ms"
    if value < 1:
        return f"{sign}{value:.2f} ms"
    if round(value) < 1_000:
        return f"{sign}{value:.0f} ms"
    if round(value, -2) < 61_000:
        return f"{sign}{value / 1000:.1f} s"
    seconds = round(value / 1000)
    if seconds < 3_600:
        minutes, rest = divmod(seconds, 60)
        return f"{sign}{minutes} min {rest} s" if rest else f"{sign}{minutes} min"
    hours, minutes = divmod(round(value / 60_000), 60)
    return f"{sign}{hours} h {minutes:02d} min"


def percent(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage: 0.3193 → 31.9%."""
    if missing(value) or (isinstance(value, float) and math.isinf(value)):
        return NO_VALUE
    return f"{float(value) * 100:.{digits}f}%"


def percents_adding_up(parts: Iterable[float], digits: int = 1) -> list[str]:
    """Shares of one whole as percentages that add up to 100.0% as shown: each rounded down,
    the tenths left over given to the largest remainders (Hamilton's method), so that
    51.7% + 24.1% + 24.1% never reads as 99.9%. Parts that are all zero read 0.0% each."""
    values = [float(part) for part in parts]
    total = sum(values)
    if not values or total <= 0:
        return [f"{0:.{digits}f}%" for _ in values]
    unit = 10 ** digits  # tenths of a percent
    exact = [value / total * 100 * unit for value in values]
    floors = [math.floor(value) for value in exact]
    left = 100 * unit - sum(floors)
    for i in sorted(range(len(values)), key=lambda i: floors[i] - exact[i])[:left]:
        floors[i] += 1
    return [f"{value / unit:.{digits}f}%" for value in floors]


_CENTS = Decimal("0.01")


def usd(value: Any, at_least: bool = False) -> str:
    """Dollars (a Decimal from queries.money) for people: cents at least, every further digit
    the amount has (`$0.50`, `$2.00`, `$0.0123`, `$0.000000002`); `≥ $0.05` for a lower bound.
    CSV and JSON write the amount's own digits (`0.5`): they are data, not prose."""
    if missing(value):
        return NO_VALUE
    amount = value if isinstance(value, Decimal) else dollars(value)
    assert amount is not None
    if int(amount.as_tuple().exponent) > -2 or amount == amount.quantize(_CENTS):
        text = format(amount.quantize(_CENTS), "f")
    else:
        text = dollar_text(amount)
    return ("≥ " if at_least else "") + "$" + text


def usd_headline(value: Any, at_least: bool = False) -> str:
    """A total of many runs for a headline tile, rounded for reading: whole cents from $1 on,
    with thousands separators (`$28.10`, `$1,234.57`), three significant digits below it
    (`$0.0983`, `$0.000412`, `$0.50`). A lower bound is rounded down, so that its `≥` stays
    true (`≥ $28.09` for 28.0982638); any other amount to the nearest. The tile's help gives
    the exact amount (`usd`), as tables, the CLI and every download do."""
    if missing(value):
        return NO_VALUE
    amount = value if isinstance(value, Decimal) else dollars(value)
    assert amount is not None
    rounding = ROUND_DOWN if at_least else ROUND_HALF_EVEN
    if amount == 0 or abs(amount) >= 1:
        text = f"{amount.quantize(_CENTS, rounding=rounding):,.2f}"
    else:
        # three significant digits, but never fewer decimals than cents
        place = min(amount.adjusted() - 2, -2)
        text = usd(amount.quantize(Decimal(1).scaleb(place), rounding=rounding))[1:]
    return ("≥ " if at_least else "") + "$" + text


def usd_nano(nano: Any, at_least: bool = False) -> str:
    """Integer nano-dollars, as the store keeps them, shown as `usd` shows dollars."""
    return usd(None if missing(nano) else dollars(nano), at_least)


def count(value: Any) -> str:
    return NO_VALUE if missing(value) else f"{int(value):,}"


def text(value: Any) -> str:
    """Any other value: its text, or NO_VALUE when it is not there."""
    return NO_VALUE if missing(value) else str(value)


def timestamp_ns(ns: Any) -> str:
    """Epoch nanoseconds as `2026-11-23 08:15:02 UTC`."""
    if missing(ns):
        return NO_VALUE
    return pd.Timestamp(int(ns), unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC")


def instant(iso: Any) -> str:
    """An ISO 8601 UTC instant as a person reads it in a list of runs: `2026-11-23 08:15` (the
    column says UTC; seconds, milliseconds and the `T`/`Z` only make it wider: the run view
    and the CSV keep the whole instant)."""
    if missing(iso):
        return NO_VALUE
    return str(iso)[:16].replace("T", " ")


def duration_axis_unit(max_ms: float) -> tuple[str, float]:
    """A unit for a chart axis whose values go up to `max_ms`: (label, divisor from ms)."""
    if max_ms >= 2 * 3_600_000:
        return "h", 3_600_000.0
    if max_ms >= 2 * 60_000:
        return "min", 60_000.0
    if max_ms >= 2_000:
        return "s", 1_000.0
    return "ms", 1.0


def is_dollars(column: str) -> bool:
    """A report column of dollars (docs/metrics.md §11.9: `cost_usd`, `usd_budget`, …)."""
    return column.endswith("_usd") or column == "usd_budget"


# The utilisation report's percentile columns: fractions of the budget.
_UTILISATION_PERCENTILES = ("p50", "p90", "p95", "p99", "max")


def table_formats(columns: Iterable[object]) -> dict[str, Callable[[Any], str]]:
    """How a terminal table shows each report column to a person: durations for *_ms,
    percentages for fractions (rates, shares, utilisations and the utilisation report's
    percentiles), dollars with their sign. CSV and JSON keep the raw numbers
    (docs/metrics.md §7)."""
    formats: dict[str, Callable[[Any], str]] = {}
    for column in columns:
        name = str(column)
        if name.endswith("_ms"):
            formats[name] = duration
        elif (name.endswith(("_rate", "_share")) or name.endswith("utilisation")
              or "utilisation_" in name or name in _UTILISATION_PERCENTILES):
            formats[name] = percent
        elif is_dollars(name):
            formats[name] = usd
    return formats


# docs/metrics.md §11.4, §11.7: in a row whose cost is incomplete, these are lower bounds.
LOWER_BOUND_COLUMNS = ("cost_usd", "cost_utilisation", "overrun_usd",
                       "weekly_budget_utilisation")


def incomplete_cost_rows(frame: pd.DataFrame) -> pd.Series | None:
    """Per row of a report, whether its cost is a lower bound (docs/metrics.md §11.4): a run's
    `cost_complete` false, a week's `incomplete_cost_runs` above 0. None when the report has
    neither column (its cost, if any, is not a run's or a week's)."""
    if "cost_complete" in frame.columns:
        flags = frame["cost_complete"].map(lambda v: not missing(v) and not bool(v))
    elif "incomplete_cost_runs" in frame.columns:
        flags = frame["incomplete_cost_runs"].map(lambda v: not missing(v) and int(v) > 0)
    else:
        return None
    return flags.astype(bool)


def at_least(shown: Callable[[Any], str]) -> Callable[[Any], str]:
    """`shown` for a lower bound: `≥ ` before the value (`≥ $0.052`, `≥ 81.2%`), NO_VALUE
    alone when there is none."""
    return lambda value: NO_VALUE if missing(value) else "≥ " + shown(value)


def lower_bound_formats(frame: pd.DataFrame, formats: dict[str, Callable[[Any], str]]
                        ) -> tuple[pd.Series | None, dict[str, Callable[[Any], str]]]:
    """The rows of `frame` whose cost is a lower bound, and the formats their
    LOWER_BOUND_COLUMNS take there (`formats`' own with `≥` before); (None, {}) when none."""
    rows = incomplete_cost_rows(frame)
    if rows is None or not rows.any():
        return None, {}
    return rows, {c: at_least(formats[c]) for c in LOWER_BOUND_COLUMNS
                  if c in frame.columns and c in formats}


def written_with_lower_bounds(frame: pd.DataFrame, formats: dict[str, Callable[[Any], str]]
                              ) -> tuple[pd.DataFrame, dict[str, Callable[[Any], str]],
                                         frozenset[str]]:
    """A report for a terminal table: its LOWER_BOUND_COLUMNS written out as `formats` shows
    them, `≥` before each value of a row whose cost is incomplete. Returns the frame, the
    formats left to apply and the columns now written as text (numbers, to right-align)."""
    rows, bounded = lower_bound_formats(frame, formats)
    if rows is None or not bounded:
        return frame, formats, frozenset()
    written = frame.assign(**{
        column: [(shown if lower else formats[column])(value)
                 for value, lower in zip(frame[column], rows, strict=True)]
        for column, shown in bounded.items()})
    left = {c: f for c, f in formats.items() if c not in bounded}
    return written, left, frozenset(bounded)


def table_headers(columns: Iterable[object]) -> dict[str, str]:
    """A terminal table's headers in the units its cells are shown in: a `*_ms` column shown as
    a duration (`25.0 s`) is headed without `_ms`; CSV and JSON keep the names."""
    return {str(c): str(c)[:-3] for c in columns if str(c).endswith("_ms")}
