"""What happened to one run against its deadline, in words: the dashboard's run view and
`budgetscope run` say it with these sentences, so the two never tell it differently.

The wording follows what happened (docs/metrics.md §4): a deadline that fired, a run that ended
or was cancelled or failed before its deadline (then the deadline never fired, and the holder
is the last step to start, not a step "running at the deadline"), and why a run is or is not
exhausted, above all when a stated outcome decides against what the clock says.

Culprit and holder are steps, named with their number (`#3 tool:fetch_report`): two calls of
one step key are two steps, so "the culprit is the holder" is said only of one and the same
call. A run that was not exhausted has no culprit to blame: its biggest spender is its
"largest consumer", and no warning is raised about which step held its deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from queries.readable import duration, missing, percent, plural
from store import vocabulary

STATED_OUTCOMES = vocabulary.RUN_OUTCOMES


@dataclass(frozen=True)
class RunStory:
    ending: str  # one sentence: how the run ended against its deadline
    holder_role: str  # what "holder" means for this run ("" without a budget)
    exhausted_reason: str  # why the run is, or is not, exhausted ("" without a budget)
    # NOT_THE_HOLDER when an exhausted run's culprit is another step than its holder, else ""
    culprit_note: str = ""
    # "culprit" in an exhausted run, else "largest consumer" (it spent the most, but is to
    # blame for nothing)
    spender: str = "culprit"
    culprit: str = ""  # "#3 tool:fetch_report", "" without one
    holder: str = ""  # "#7 model:gpt-4o", "" without one
    # how culprit and holder relate, in words: the same call, another call of the same step,
    # or another step ("" when either is missing)
    relation: str = ""


# SPEC §4: said when the step that spent the most is not the step that held the deadline.
NOT_THE_HOLDER = ("culprit is not the holder: the step that held the deadline is not the one "
                  "that spent the budget")
CULPRIT, LARGEST_CONSUMER = "culprit", "largest consumer"


def step_name(number: Any, key: Any) -> str:
    """A step as every view names it: `#3 tool:fetch_report` (the key alone without a number)."""
    if missing(key):
        return ""
    return str(key) if missing(number) else f"#{int(number)} {key}"


def relation_clause(run: Mapping[str, Any], spender: str) -> str:
    """What the holder is to the culprit (or largest consumer): "the same call", "another call
    of the same step, not the culprit itself", "another step than the culprit"; "" when either
    is missing."""
    culprit, holder = run.get("culprit_span_id"), run.get("holder_span_id")
    if missing(culprit) or missing(holder):
        return ""
    if culprit == holder:
        return "the same call"
    if run.get("culprit_key") == run.get("holder_key"):
        return f"another call of the same step, not the {spender} itself"
    return f"another step than the {spender}"


def _relation(run: Mapping[str, Any], spender: str) -> tuple[str, str]:
    """(the relation in words, the warning for an exhausted run whose culprit is not its
    holder)."""
    clause = relation_clause(run, spender)
    if not clause:
        return "", ""
    if clause == "the same call":
        return f"The {spender} is the holder: the same call.", ""
    holder_name = step_name(run.get("holder_step"), run.get("holder_key"))
    return (f"The holder {holder_name} is {clause}.",
            NOT_THE_HOLDER if spender == CULPRIT else "")


def _offset(run: Mapping[str, Any], ns: Any) -> str:
    return "+" + duration((int(ns) - int(run["start_ns"])) / 1e6)


def _exhausted(run: Mapping[str, Any]) -> bool:
    value = run.get("exhausted")
    return not missing(value) and bool(value)


def tell(run: Mapping[str, Any]) -> RunStory:
    """The story of a row of the runs table."""
    spender = CULPRIT if _exhausted(run) else LARGEST_CONSUMER
    culprit = step_name(run.get("culprit_step"), run.get("culprit_key"))
    holder = step_name(run.get("holder_step"), run.get("holder_key"))
    relation, note = _relation(run, spender)
    if missing(run.get("budget_ms")) or missing(run.get("deadline_ns")):
        return RunStory("No budget is known for this run (no budget.total_ms and no declared "
                        "budget), so it has no deadline and no attribution.", "", "",
                        spender=spender)
    deadline, latest = int(run["deadline_ns"]), int(run["latest_end_ns"])
    outcome = None if missing(run.get("outcome")) else str(run["outcome"]).strip().lower()
    stated = outcome if outcome in STATED_OUTCOMES else None
    fired = latest >= deadline
    at_deadline = _offset(run, deadline)
    at_deadline_flag = run.get("holder_at_deadline")
    # SPEC §4: only a holder active at d was running when the deadline fired. Without the
    # derivation's flag (a file derived before it existed), a deadline that fired stands in.
    running = fired if missing(at_deadline_flag) else bool(at_deadline_flag)
    if fired:
        over = duration((latest - deadline) / 1e6)
        ending = (f"The deadline fired at {at_deadline}; the run's last span ended at "
                  f"{_offset(run, latest)}" + (f", {over} past it." if latest > deadline
                                               else ", on it."))
        holder_role = ("running when the deadline fired" if running else
                       "the last step to start before the run ended; no step was running "
                       "when the deadline fired")
    else:
        early = duration((deadline - latest) / 1e6)
        verb = {"cancelled": "Cancelled", "failed": "Failed"}.get(stated or "", "Ended")
        ending = (f"{verb} at {_offset(run, latest)}, {early} before its deadline at "
                  f"{at_deadline}: the deadline never fired.")
        holder_role = "the last step to start before the run ended; the deadline never fired"
    return RunStory(ending, holder_role, _exhausted_reason(run, stated, fired), note,
                    spender, culprit, holder, relation)


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
    if refused and (missing(run.get("exhausted")) or _exhausted(run)):
        return (f"Exhausted: {plural(refused, 'step')} {'were' if refused > 1 else 'was'} "
                "refused for lack of budget.")
    if refused:
        # docs/metrics.md §4: a refusal for tokens or dollars does not exhaust the time budget
        return ("Not exhausted in time: it ended before its deadline, and its refused "
                f"{'steps were' if refused > 1 else 'step was'} refused for lack of tokens or "
                "dollars, not time.")
    return "Not exhausted: it ended before its deadline and no step was refused."


# ---- the summary block: what happened, who spent and held, failures, writes, next step ------

# Failure classes as on-call reads them, in SPEC §3's order (ok is no failure).
FAILURE_WORDS = {
    "client_timeout": "client give-up",
    "upstream_error": "upstream failure",
    "refused": "refused",
    "cancelled": "cancelled",
    "client_error": "client error",
    "error": "error",
}


def spent_and_held(run: Mapping[str, Any], story: RunStory) -> str:
    """Who spent and who held, with their numbers, in one or two sentences."""
    if not story.culprit:
        return "No top-level step spent any of the budget." if not missing(
            run.get("budget_ms")) else ""
    spender = story.spender[0].upper() + story.spender[1:]
    spent = (f"{spender} {story.culprit}: {percent(run.get('culprit_share'))} of the budget "
             f"({duration(run.get('culprit_ms'))}).")
    if not story.holder:
        return spent
    clause = relation_clause(run, story.spender)
    if clause == "the same call":
        return f"{spent} It is also the holder ({story.holder_role}): the same call."
    return f"{spent} Holder {story.holder} ({story.holder_role}): {clause}."


def answers(run: Mapping[str, Any], story: RunStory, steps: pd.DataFrame,
            writes: pd.DataFrame) -> list[tuple[str, str]]:
    """On-call's answers, (label, sentence), as the run view and `budgetscope run` both open:
    what happened, who spent and who held, failures by class, and the writes. The uncertain
    writes one by one (uncertain_writes) and the next step (next_step) follow them."""
    out = [("What happened", " ".join(p for p in (story.ending, story.exhausted_reason) if p))]
    spent = spent_and_held(run, story)
    if spent:
        out.append(("Who spent, who held", spent))
    out.append(("Failures", failures_line(steps)))
    out.append(("Writes", writes_line(writes)))
    return out


def failures_line(steps: pd.DataFrame) -> str:
    """Failed steps by class, each with the numbers of its steps: "2 client give-ups (#3, #5),
    1 refused (#8)"; "no failed step" when none failed."""
    if steps.empty:
        return "no steps"
    parts = []
    for name, word in FAILURE_WORDS.items():
        hit = steps[steps["step_class"] == name]
        if hit.empty:
            continue
        numbers = ", ".join(f"#{n}" for n in hit["number"].head(6))
        more = "…" if len(hit) > 6 else ""
        parts.append(f"{plural(len(hit), word)} ({numbers}{more})")
    return ", ".join(parts) if parts else "no failed step"


def writes_line(writes: pd.DataFrame) -> str:
    """The run's writes counted as docs/metrics.md §6 counts them."""
    if writes.empty:
        return "no write step"
    return (f"{plural(len(writes), 'write step')}: {int(writes['is_uncertain'].sum()):,} "
            f"uncertain, {int(writes['reconciled'].sum()):,} reconciled, "
            f"{plural(int(writes['orphan'].sum()), 'orphan')}")


@dataclass(frozen=True)
class WriteNote:
    """An uncertain write on-call must know of before retrying anything."""
    step: str  # "#5 tool:issue_refund"
    key: str  # the idempotency key ("" when the write has none)
    orphan: bool  # nobody read it back
    last_result: str  # the latest reconciliation's result, "" for an orphan

    def sentence(self) -> str:
        key = f"idempotency key {self.key}" if self.key else "no idempotency key"
        if self.orphan:
            return (f"{self.step} may have taken effect and nobody read it back ({key}): "
                    "read it back before retrying.")
        return f"{self.step} was uncertain and read back: {self.last_result} ({key})."


def uncertain_writes(writes: pd.DataFrame, steps: pd.DataFrame) -> list[WriteNote]:
    """The run's uncertain writes, orphans first, named with their step numbers."""
    if writes.empty:
        return []
    numbers = dict(zip(steps["span_id"], steps["number"], strict=True)) if not steps.empty \
        else {}
    notes = []
    for write in writes.itertuples(index=False):
        if not (write.is_uncertain or write.orphan):
            continue
        number = numbers.get(write.span_id)
        notes.append(WriteNote(
            f"#{number} {write.step_key}" if number else str(write.step_key),
            "" if missing(write.idempotency_key) else str(write.idempotency_key),
            bool(write.orphan), "" if missing(write.last_result) else str(write.last_result)))
    return sorted(notes, key=lambda note: not note.orphan)


# A top-level step that used at least this much of its allocation "used most of it".
MOST_OF_ITS_ALLOCATION = 0.9


@dataclass(frozen=True)
class NextStep:
    """One next step for on-call, drawn from the run's own data.

    kind: READ_BACK (an orphan write: read its key back before retrying), SMALLER_CAP (a
    capped tool that used most of its allocation and spent much of the budget: What if at a
    smaller cap), COMPARE (nothing stands out: compare with the typical run)."""
    kind: str
    text: str
    step_key: str = ""  # SMALLER_CAP: the step key to re-cap
    cap_ms: int = 0  # SMALLER_CAP: the smaller cap to try


READ_BACK, SMALLER_CAP, COMPARE = "read_back", "smaller_cap", "compare"


def next_step(run: Mapping[str, Any], steps: pd.DataFrame, writes: pd.DataFrame) -> NextStep:
    orphans = [note for note in uncertain_writes(writes, steps) if note.orphan]
    if orphans:
        first = orphans[0]
        key = f"key {first.key}" if first.key else "its effect (it has no idempotency key)"
        more = f" (and {plural(len(orphans) - 1, 'other orphan write')})" if len(
            orphans) > 1 else ""
        return NextStep(READ_BACK, f"Read back {key} of {first.step}{more} before retrying: "
                                   "the write may have taken effect.")
    hog = _capped_step_that_used_its_allocation(run, steps)
    if hog is not None:
        smaller = max(100, int(round(float(hog["allocated_ms"]) / 2, -2)))
        name = step_name(hog["number"], hog["step_key"])
        return NextStep(
            SMALLER_CAP,
            f"{name} used {percent(hog['utilisation'])} of its "
            f"{duration(hog['allocated_ms'])} allocation and spent "
            f"{percent(float(hog['consumption_ms']) / float(run['budget_ms']))} of the budget: "
            f"see in What if how the agent's runs fare with its cap at {duration(smaller)}.",
            str(hog["step_key"]), smaller)
    return NextStep(COMPARE, "Compare with a typical run of this agent: where did the time go "
                             "differently?")


def _capped_step_that_used_its_allocation(run: Mapping[str, Any],
                                          steps: pd.DataFrame) -> pd.Series | None:
    """The top-level tool step with a recorded cap that used most of its allocation and spent
    the most of the budget, in an exhausted run; None when there is none. Only tools with a
    cap: those are what What if can re-cap."""
    if steps.empty or not _exhausted(run) or missing(run.get("budget_ms")):
        return None
    top = steps[steps["is_top_level"].astype(bool) & (steps["kind"] == "tool")
                & steps["cap_ms"].notna() & steps["allocated_ms"].notna()
                & (steps["utilisation"].fillna(0) >= MOST_OF_ITS_ALLOCATION)
                & (steps["consumption_ms"].fillna(0) > 0)]
    if top.empty:
        return None
    return top.sort_values(["consumption_ms", "start_ns"], ascending=[False, True]).iloc[0]
