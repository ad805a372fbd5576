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


# docs/metrics.md §4: said when the step that spent the most is not the step that held the deadline.
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
    # docs/metrics.md §4: only a holder active at d was running when the deadline fired. Without the
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

# Failure classes as on-call reads them, in docs/metrics.md §3's order (ok is no failure).
FAILURE_WORDS = {
    "client_timeout": "client give-up",
    "upstream_error": "upstream failure",
    "refused": "refused",
    "cancelled": "cancelled",
    "client_error": "client error",
    "error": "error",
}
# Participles stay as they are in the plural: "2 refused", never "2 refuseds".
_SAME_IN_THE_PLURAL = frozenset({"refused", "cancelled"})


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
        many = word if word in _SAME_IN_THE_PLURAL else None
        parts.append(f"{plural(len(hit), word, many)} ({numbers}{more})")
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


@dataclass(frozen=True)
class NextStep:
    """One next step for on-call, drawn from the run's own data; one that exists and fits
    the run, never a link to a page with nothing to show.

    kind:
    - READ_BACK: an orphan write: read its key back before retrying;
    - DECLARE_BUDGET: the run has no budget, so nothing else can be measured: declare one;
    - SMALLER_CAP: an exhausted run whose culprit has a cap: What if at a smaller one;
    - DECLARE_CAP: an exhausted run whose culprit has none: declare one, What if with it;
    - COMPARE: nothing above, and a completed run of the agent exists to compare with;
    - NOTHING: nothing above and nothing to compare with.

    `commands`: the exact commands (arguments after `budgetscope --db DB`) that take the step
    in a terminal; `step_key`, `cap_ms`, `agent`, `since` and `until` say the What if
    scenario (SMALLER_CAP, DECLARE_CAP) for a link."""
    kind: str
    text: str
    step_key: str = ""  # SMALLER_CAP, DECLARE_CAP: the step key to cap
    cap_ms: int = 0  # SMALLER_CAP, DECLARE_CAP: the cap to try
    agent: str = ""  # whose runs What if replays ("" for runs without an agent)
    since: str = ""  # the days What if replays: the week around the run's start
    until: str = ""
    commands: tuple[tuple[str, ...], ...] = ()

    @property
    def what_if(self) -> bool:
        """Whether the step is a scenario for What if (a cap to try on `step_key`)."""
        return self.kind in (SMALLER_CAP, DECLARE_CAP)

    def what_if_params(self) -> dict[str, str]:
        """The What if page's address parameters for the scenario: the agent's runs of the
        week around the run, with the step's cap in ms (the scenario the commands run)."""
        return {"range": "custom", "since": self.since, "until": self.until,
                **({"agent": self.agent} if self.agent else {}),
                "cap": f"{self.step_key}={self.cap_ms}"}


READ_BACK, SMALLER_CAP, COMPARE = "read_back", "smaller_cap", "compare"
DECLARE_CAP, DECLARE_BUDGET, NOTHING = "declare_cap", "declare_budget", "nothing"
# What if replays the runs of the week around the run's start: 3 days before its day, 4 after.
WHAT_IF_DAYS_BEFORE, WHAT_IF_DAYS_AFTER = 3, 4


def command_duration(ms: float) -> str:
    """A duration as `simulate --cap` and `budgets` take it: `4.5s`, `12s`, `850ms`."""
    value = int(round(float(ms)))
    if value % 1000 == 0:
        return f"{value // 1000}s"
    if value % 100 == 0:
        return f"{value / 1000:.1f}s"
    return f"{value}ms"


def _half(ms: float) -> int:
    """Half of `ms`, to 100 ms, at least 100 ms: the cap a next step suggests."""
    return max(100, int(round(float(ms) / 2, -2)))


def _what_if_window(run: Mapping[str, Any]) -> tuple[str, str]:
    day = pd.Timestamp(int(run["start_ns"]), unit="ns", tz="UTC").normalize()
    return ((day - pd.Timedelta(days=WHAT_IF_DAYS_BEFORE)).date().isoformat(),
            (day + pd.Timedelta(days=WHAT_IF_DAYS_AFTER)).date().isoformat())


def simulate_arguments(step_key: str, cap_ms: int, agent: str, since: str,
                       until: str) -> tuple[str, ...]:
    """`budgetscope simulate` for one cap on the agent's runs of the window, as a table."""
    return ("simulate", "--cap", f"{step_key}={command_duration(cap_ms)}",
            *(("--agent", agent) if agent else ()), "--since", since, "--until", until,
            "--format", "table")


def next_step(run: Mapping[str, Any], steps: pd.DataFrame, writes: pd.DataFrame,
              typical: bool = False) -> NextStep:
    """The one next step for this run (NextStep says which, in which order). `typical`:
    whether a completed run of its agent exists to compare with (queries.run_compare)."""
    orphans = [note for note in uncertain_writes(writes, steps) if note.orphan]
    if orphans:
        first = orphans[0]
        key = f"key {first.key}" if first.key else "its effect (it has no idempotency key)"
        more = f" (and {plural(len(orphans) - 1, 'other orphan write')})" if len(
            orphans) > 1 else ""
        return NextStep(READ_BACK, f"Read back {key} of {first.step}{more} before retrying: "
                                   "the write may have taken effect.")
    agent = "" if missing(run.get("agent")) else str(run["agent"])
    if missing(run.get("budget_ms")):
        return _declare_budget(run, agent)
    culprit = _culprit(run, steps) if _exhausted(run) else None
    if culprit is not None:
        return _cap_the_culprit(run, culprit, agent)
    if typical:
        return NextStep(COMPARE, "Compare with a typical run of this agent: where did the "
                                 "time go differently?")
    why = ("no top-level step spent the budget" if _exhausted(run)
           else "it was not exhausted")
    return NextStep(NOTHING, f"Nothing to change here ({why}), and no completed run of "
                             f"{agent or 'its agent'} to compare it with: read the steps "
                             "below.")


def _declare_budget(run: Mapping[str, Any], agent: str) -> NextStep:
    """A run without a budget: declare one for its agent (the default for a run without an
    agent), suggested at 1.5 times this run's elapsed time, to a whole second."""
    elapsed = run.get("elapsed_ms")
    suggested = 60_000 if missing(elapsed) else max(1_000, int(-(-float(elapsed) * 1.5
                                                                  // 1_000)) * 1_000)
    target = ("budgets", "set", agent) if agent else ("budgets", "set", "--default")
    whose = f"{agent}'s" if agent else "the default"
    return NextStep(
        DECLARE_BUDGET,
        f"Declare {whose} budget, so that this run's deadline, utilisation and culprit can be "
        f"measured (docs/metrics.md §10): use the budget the product gives it; "
        f"{duration(suggested)} is 1.5 times this run's elapsed time.", agent=agent,
        commands=((*target, command_duration(suggested)),))


def _culprit(run: Mapping[str, Any], steps: pd.DataFrame) -> pd.Series | None:
    span = run.get("culprit_span_id")
    if steps.empty or missing(span):
        return None
    hit = steps[steps["span_id"] == span]
    if hit.empty or float(hit.iloc[0].get("consumption_ms") or 0) <= 0:
        return None
    return hit.iloc[0]


def _cap_the_culprit(run: Mapping[str, Any], step: pd.Series, agent: str) -> NextStep:
    """An exhausted run's culprit: What if at half its cap (or at half what it took, when
    that is less) for a capped one; declare a cap at half what it took for an uncapped one."""
    name = step_name(step.get("number"), step["step_key"])
    key = str(step["step_key"])
    since, until = _what_if_window(run)
    share = percent(float(step["consumption_ms"]) / float(run["budget_ms"]))
    took = float(step["duration_ms"]) if not missing(step.get("duration_ms")) else \
        float(step["consumption_ms"])
    whose = f"{agent}'s runs" if agent else "the runs"
    window = f"({since} to {until}, the week around this run)"
    if not missing(step.get("cap_ms")):
        limit = float(step["allocated_ms"]) if not missing(step.get("allocated_ms")) else \
            float(step["cap_ms"])
        smaller = _half(min(limit, took))
        used = ("" if missing(step.get("utilisation")) else
                f"used {percent(step['utilisation'])} of its {duration(limit)} allocation and ")
        return NextStep(
            SMALLER_CAP,
            f"{name} {used}spent {share} of the budget: see in What if how {whose} fare "
            f"with its cap at {duration(smaller)} {window}.", key, smaller, agent, since,
            until, (simulate_arguments(key, smaller, agent, since, until),))
    suggested = _half(took)
    return NextStep(
        DECLARE_CAP,
        f"{name} has no cap and spent {share} of the budget ({duration(took)}): declare one "
        "(the agent enforces it, e.g. the SDK's cap=; declared here, it is the allocation of "
        "the key's steps that record none, docs/metrics.md §10), and see in What if how "
        f"{whose} fare with it capped at "
        f"{duration(suggested)} {window}.", key,
        suggested, agent, since, until,
        (("budgets", "cap", key, command_duration(suggested)),
         simulate_arguments(key, suggested, agent, since, until)))
