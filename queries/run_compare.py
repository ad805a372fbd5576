"""Comparing one run with a healthy one of the same agent, for on-call: which run is typical,
and the two runs' steps side by side. Pure functions over `queries.run_view.load_run` results
and the `runs` report (docs/metrics.md §8), so the dashboard page only draws what these return.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace

import pandas as pd

from queries.filters import Filters

# The outcome a healthy run states (docs/metrics.md §2 `budget.run.outcome`).
HEALTHY_OUTCOME = "completed"

# Where a step (or a step key) was seen: in both runs, only in the run under review, or only
# in the run it is compared with.
BOTH, ONLY_RUN, ONLY_OTHER = "both", "only in this run", "only in the other run"

STEP_COLUMNS = ["step_key", "occurrence", "present", "step_class_run", "step_class_other",
                "offset_ms_run", "offset_ms_other",
                "duration_ms_run", "duration_ms_other", "duration_ms_diff",
                "consumption_ms_run", "consumption_ms_other", "consumption_ms_diff"]
KEY_COLUMNS = ["step_key", "present", "steps_run", "steps_other",
               "duration_ms_run", "duration_ms_other", "duration_ms_diff",
               "consumption_ms_run", "consumption_ms_other", "consumption_ms_diff"]


@dataclass(frozen=True)
class TypicalChoice:
    """The typical run chosen for `run_id`, or why there is none (`run_id` None)."""
    run_id: str | None
    candidates: int  # completed runs of the agent with a utilisation, other than the run itself
    median_utilisation: float | None
    reason: str
    window: str = ""  # where the candidates were looked for, in words


# Where a typical run is looked for: the run's own time, not the page's range (a run from last
# month reviewed under "Last 7 days" had nothing, or this week's runs, to compare with). The
# week around its start first; a month when the week holds no other completed run; then all.
AROUND = ((dt.timedelta(days=3.5), "the week around this run's start"),
          (dt.timedelta(days=15), "the month around this run's start"),
          (None, "all time"))


def _when(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M")


def typical_around(start_ns: int, agent: object, exclude_run_id: str,
                   runs_of: Callable[[Filters], pd.DataFrame]
                   ) -> tuple[TypicalChoice, pd.DataFrame]:
    """The typical run of `agent` among its runs around `start_ns` (AROUND, nearest first),
    and the runs it was chosen among. `runs_of` gives the runs report for filters."""
    centre = dt.datetime.fromtimestamp(start_ns / 1e9, dt.UTC)
    who = None if _missing(agent) else str(agent)
    choice, runs = TypicalChoice(None, 0, None, ""), pd.DataFrame()
    for half, words in AROUND:
        since, until = (None, None) if half is None else (centre - half, centre + half)
        runs = runs_of(Filters(since, until, who))
        window = words if half is None else \
            f"{words} ({_when(since)} → {_when(until)} UTC)"  # type: ignore[arg-type]
        choice = replace(typical_run(runs, agent, exclude_run_id), window=window)
        if choice.run_id:
            break
    return choice, runs


def typical_run(runs: pd.DataFrame, agent: object, exclude_run_id: str) -> TypicalChoice:
    """The median-utilisation completed run of `agent` among `runs` (the runs report of the
    period), never the run under review itself.

    With an even number of candidates the lower middle one is taken (a real run, not an average
    of two); equal utilisations are ordered by start then run id, so the choice is stable."""
    same_agent = runs["agent"].isna() if _missing(agent) else runs["agent"] == agent
    pool = runs[same_agent & (runs["outcome"] == HEALTHY_OUTCOME)
                & runs["utilisation"].notna() & (runs["run_id"] != exclude_run_id)]
    if pool.empty:
        who = "without an agent" if _missing(agent) else f"of agent {agent}"
        return TypicalChoice(None, 0, None,
                             f"no other completed run {who} with a budget")
    ordered = pool.sort_values(["utilisation", "start", "run_id"], kind="stable")
    middle = ordered.iloc[(len(ordered) - 1) // 2]
    return TypicalChoice(str(middle["run_id"]), len(ordered), float(middle["utilisation"]),
                         f"the median-utilisation completed run of {len(ordered):,} "
                         f"completed run{'' if len(ordered) == 1 else 's'}")


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def _numbered(steps: pd.DataFrame) -> pd.DataFrame:
    """Steps with `occurrence`: 1 for the first step of a key by start, 2 for the second…"""
    columns = ["step_key", "step_class", "start_ns", "offset_ms", "duration_ms",
               "consumption_ms", "span_id"]
    if steps.empty:
        return pd.DataFrame(columns=[*columns, "occurrence"])
    ordered = steps[columns].assign(step_key=steps["step_key"].fillna("")).sort_values(
        ["start_ns", "span_id"], kind="stable")
    return ordered.assign(occurrence=ordered.groupby("step_key").cumcount() + 1)


def _present(joined: pd.DataFrame) -> pd.Series:
    in_run, in_other = joined["_merge"] != "right_only", joined["_merge"] != "left_only"
    return pd.Series([BOTH if a and b else ONLY_RUN if a else ONLY_OTHER
                      for a, b in zip(in_run, in_other, strict=True)],
                     index=joined.index, dtype=object)


def align_steps(run_steps: pd.DataFrame, other_steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step of either run, matched by step key and order of occurrence (the
    n-th `tool.search` of one run beside the n-th of the other), in the run's start order with
    the other run's unmatched steps after. Differences are run − other: positive means the
    run under review spent more."""
    run, other = _numbered(run_steps), _numbered(other_steps)
    joined = run.merge(other, on=["step_key", "occurrence"], how="outer",
                       suffixes=("_run", "_other"), indicator=True, sort=False)
    joined["present"] = _present(joined)
    for quantity in ("duration_ms", "consumption_ms"):
        joined[f"{quantity}_diff"] = (joined[f"{quantity}_run"].astype(float)
                                      - joined[f"{quantity}_other"].astype(float))
    joined["_order_run"] = joined["start_ns_run"].astype(float)
    joined["_order_other"] = joined["start_ns_other"].astype(float)
    ordered = joined.sort_values(["_order_run", "_order_other"], na_position="last",
                                 kind="stable")
    return ordered[STEP_COLUMNS].reset_index(drop=True)


def compare_by_key(aligned: pd.DataFrame) -> pd.DataFrame:
    """Per step key: how many steps each run had, their summed duration and consumption in
    both runs, and the differences (run − other), the largest consumption difference first.
    A key absent from one run counts 0 steps and 0 ms there."""
    if aligned.empty:
        return pd.DataFrame(columns=KEY_COLUMNS)
    table = aligned.assign(
        steps_run=aligned["present"] != ONLY_OTHER,
        steps_other=aligned["present"] != ONLY_RUN)
    grouped = table.groupby("step_key", sort=False).agg(
        steps_run=("steps_run", "sum"), steps_other=("steps_other", "sum"),
        duration_ms_run=("duration_ms_run", lambda s: s.astype(float).sum()),
        duration_ms_other=("duration_ms_other", lambda s: s.astype(float).sum()),
        consumption_ms_run=("consumption_ms_run", lambda s: s.astype(float).sum()),
        consumption_ms_other=("consumption_ms_other", lambda s: s.astype(float).sum()),
    ).reset_index()
    grouped["steps_run"] = grouped["steps_run"].astype(int)
    grouped["steps_other"] = grouped["steps_other"].astype(int)
    grouped["present"] = [BOTH if a and b else ONLY_RUN if a else ONLY_OTHER
                          for a, b in zip(grouped["steps_run"], grouped["steps_other"],
                                          strict=True)]
    for quantity in ("duration_ms", "consumption_ms"):
        grouped[f"{quantity}_diff"] = grouped[f"{quantity}_run"] - grouped[f"{quantity}_other"]
    ordered = grouped.assign(_size=grouped["consumption_ms_diff"].abs()).sort_values(
        ["_size", "step_key"], ascending=[False, True], kind="stable")
    return ordered[KEY_COLUMNS].reset_index(drop=True)
