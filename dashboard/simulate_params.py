"""What if's whole policy in its address, so that a scenario pasted into an incident channel
opens as the same scenario: `simulate?cap=model:gpt-4o-mini=10000&cap=tool:fetch_report=4500
&deadline=45000&minstart=1000&retries=off`.

- `cap=STEP_KEY=MS` (repeatable): a step key's cap under the policy, in ms; any step key, of
  any kind, capped in the record or not;
- `deadline=MS`: every budgeted run's budget; absent: each run's own;
- `minstart=MS`: refuse a call below this much budget left; absent: refusals as recorded;
- `retries=off`: drop the recorded retries; absent: retries on.

Pure: parsing and writing query parameters, no widgets (dashboard/app_pages/simulate.py moves
them to and from its sliders). Values are whole milliseconds, as the policy holds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from simulation.policy import SimulationPolicy

CAP, DEADLINE, MIN_START, RETRIES = "cap", "deadline", "minstart", "retries"
KEYS = (CAP, DEADLINE, MIN_START, RETRIES)
OFF = "off"


@dataclass(frozen=True)
class Scenario:
    """A What if policy as its address says it: caps by step key (sorted), the run deadline
    and the minimum to start a call in ms (None: as recorded), and retries."""

    caps: tuple[tuple[str, int], ...] = ()
    deadline_ms: int | None = None
    min_start_ms: int | None = None
    retries: bool = True

    def policy(self) -> SimulationPolicy:
        return SimulationPolicy(dict(self.caps), self.deadline_ms, self.min_start_ms,
                                self.retries)


def _ms(text: str, what: str, problems: list[str], zero: bool = False) -> int | None:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value < 0 or (value == 0 and not zero) or value > 366 * 86_400_000:
        problems.append(f"{what}={text!r} is not a number of milliseconds; left as recorded")
        return None
    return round(value)


def from_params(params: Mapping[str, Sequence[str]]) -> tuple[Scenario, list[str]]:
    """(the scenario, problems with the link). `params`: each key's values (a repeated key,
    `cap`, has several); a value that cannot be used is left out with a message."""
    problems: list[str] = []
    caps: dict[str, int] = {}
    for text in params.get(CAP, ()):
        key, sep, ms = text.rpartition("=")  # a step key may hold "=", a number never does
        value = _ms(ms, f"cap {key}", problems) if sep and key else None
        if not sep or not key:
            problems.append(f"cap={text!r} is not STEP_KEY=MS (e.g. tool:fetch_report=4500); "
                            "left out")
        elif value is not None:
            caps[key] = value
    deadline = min_start = None
    if params.get(DEADLINE):
        deadline = _ms(params[DEADLINE][-1], DEADLINE, problems)
    if params.get(MIN_START):
        min_start = _ms(params[MIN_START][-1], MIN_START, problems, zero=True) or None
    retries = True
    if params.get(RETRIES):
        retries = params[RETRIES][-1] != OFF
        if params[RETRIES][-1] not in (OFF, "on"):
            problems.append(f"retries={params[RETRIES][-1]!r} is on or off; left on")
            retries = True
    return Scenario(tuple(sorted(caps.items())), deadline, min_start, retries), problems


def to_params(scenario: Scenario) -> dict[str, str | list[str]]:
    """The address's parameters for `scenario`: only what differs from the record."""
    params: dict[str, str | list[str]] = {}
    if scenario.caps:
        params[CAP] = [f"{key}={ms}" for key, ms in scenario.caps]
    if scenario.deadline_ms is not None:
        params[DEADLINE] = str(scenario.deadline_ms)
    if scenario.min_start_ms is not None:
        params[MIN_START] = str(scenario.min_start_ms)
    if not scenario.retries:
        params[RETRIES] = OFF
    return params
