"""What happened to one run against its deadline, in words: the dashboard's run view and
`budgetscope run` say it with these sentences, so the two never tell it differently.

The wording follows what happened (docs/metrics.md §4): a deadline that fired, a run that ended
or was cancelled or failed before its deadline (then the deadline never fired, and the holder
is the last step to start, not a step "running at the deadline"), and why a run is or is not
exhausted, above all when a stated outcome decides against what the clock says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queries.readable import duration, missing
from store import vocabulary

STATED_OUTCOMES = vocabulary.RUN_OUTCOMES


@dataclass(frozen=True)
class RunStory:
    ending: str  # one sentence: how the run ended against its deadline
    holder_role: str  # what "holder" means for this run ("" without a budget)
    exhausted_reason: str  # why the run is, or is not, exhausted ("" without a budget)
    # NOT_THE_HOLDER when the culprit is another span than the holder, else ""
    culprit_note: str = ""


# SPEC §4: said when the step that spent the most is not the step that held the deadline.
NOT_THE_HOLDER = ("culprit is not the holder: the step that held the deadline is not the one "
                  "that spent the budget")


def _culprit_note(run: Mapping[str, Any]) -> str:
    culprit = run.get("culprit_span_id")
    if missing(culprit) or culprit == run.get("holder_span_id"):
        return ""
    return NOT_THE_HOLDER


def _offset(run: Mapping[str, Any], ns: Any) -> str:
    return "+" + duration((int(ns) - int(run["start_ns"])) / 1e6)


def tell(run: Mapping[str, Any]) -> RunStory:
    """The story of a row of the runs table."""
    if missing(run.get("budget_ms")) or missing(run.get("deadline_ns")):
        return RunStory("No budget is known for this run (no budget.total_ms and no declared "
                        "budget), so it has no deadline and no attribution.", "", "")
    deadline, latest = int(run["deadline_ns"]), int(run["latest_end_ns"])
    outcome = None if missing(run.get("outcome")) else str(run["outcome"]).strip().lower()
    stated = outcome if outcome in STATED_OUTCOMES else None
    fired = latest >= deadline
    at_deadline = _offset(run, deadline)
    if fired:
        over = duration((latest - deadline) / 1e6)
        ending = (f"The deadline fired at {at_deadline}; the run's last span ended at "
                  f"{_offset(run, latest)}" + (f", {over} past it." if latest > deadline
                                               else ", on it."))
        holder_role = "running when the deadline fired"
    else:
        early = duration((deadline - latest) / 1e6)
        verb = {"cancelled": "Cancelled", "failed": "Failed"}.get(stated or "", "Ended")
        ending = (f"{verb} at {_offset(run, latest)}, {early} before its deadline at "
                  f"{at_deadline}: the deadline never fired.")
        holder_role = "the last step to start before the run ended; the deadline never fired"
    return RunStory(ending, holder_role, _exhausted_reason(run, stated, fired),
                    _culprit_note(run))


def _exhausted_reason(run: Mapping[str, Any], stated: str | None, fired: bool) -> str:
    if stated is not None:
        exhausted = stated in ("exhausted", "partial")
        verdict = "exhausted" if exhausted else "not exhausted"
        against = ""
        if fired and not exhausted:
            against = " although it ran to its deadline"
        elif not fired and exhausted:
            against = " although it ended before its deadline"
        return (f"{verdict.capitalize()}{against}: the agent stated the outcome {stated!r}, "
                "and a stated outcome decides (docs/metrics.md §4).")
    if fired:
        return "Exhausted: it ran to its deadline."
    refused = 0 if missing(run.get("refused_steps")) else int(run["refused_steps"])
    if refused:
        return (f"Exhausted: {refused} step{'s were' if refused > 1 else ' was'} refused for "
                "lack of budget.")
    return "Not exhausted: it ended before its deadline and no step was refused."
