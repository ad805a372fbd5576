"""What one run spent in tokens and dollars, in words (docs/metrics.md §11): the cost block of
`budgetscope run`, worded once here so that the dashboard's run view can say it the same way.

The block answers what §11.9 asks of it: spent of budget and over by how much, the cost
culprit with its share, the crosser with the cumulative spend before and after it, `≥` and the
unpriced models when the cost is only a lower bound, and the tokens (in / cache read / cache
write / out / reasoning). As for time (queries/run_story.py), culprit and crosser are steps
named with their number (`#3 model:gpt-4o`), and a run that did not exhaust its dollar budget
has no culprit to blame: its biggest spender "spent most".

Every text from a span (a model name, a step key) is given as it was sent: the caller makes it
inert for its medium (queries.terminal for a terminal). Names are shortened to NAME_CHARS, so
that a 10 KB model name cannot fill a screen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from queries.loader import Connection, frame
from queries.readable import NO_VALUE, count, missing, percent, plural, usd_nano
from queries.run_story import step_name

# The steps' cost columns (sql/run_step_costs.sql), joined to the run's steps by span id.
STEP_COST_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                     "reasoning_tokens", "tokens", "cost_nano", "cost_complete", "cost_source",
                     "unmetered", "possibly_billed", "consumption_usd_nano",
                     "consumption_tokens", "cost_share", "token_share")

# Characters of a model name or step key shown in a sentence (the stored value is whole).
NAME_CHARS = 60

# Where a step's cost came from, as the run view and the terminal say it (§11.3).
SOURCE_WORDS = {
    "reported": "reported",
    "override": "your price",
    "bundled": "bundled price",
    "unpriced": "no price",
    "mixed": "mixed sources",
}


def has_costs(run: Mapping[str, Any]) -> bool:
    """Whether the run's row carries the cost columns: every DuckDB file of schema 7 does; a
    backend that does not derive tokens and dollars has none, and shows no cost block."""
    return "cost_nano" in run


def with_step_costs(con: Connection, run: Mapping[str, Any],
                    steps: pd.DataFrame) -> pd.DataFrame:
    """`steps` (of queries.run_view) with each step's tokens and cost (STEP_COST_COLUMNS)."""
    if not has_costs(run):
        return steps
    costs = frame(con, "run_step_costs", {"run_id": str(run["run_id"])})
    return steps.merge(costs, on="span_id", how="left", validate="one_to_one")


def short(name: Any) -> str:
    text = "" if missing(name) else str(name)
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 1] + "…"


def _count(run: Mapping[str, Any], column: str) -> int:
    value = run.get(column)
    return 0 if missing(value) else int(value)


def _flag(run: Mapping[str, Any], column: str) -> bool:
    value = run.get(column)
    return not missing(value) and bool(value)


def _listed(values: Any) -> list[str]:
    """A list column (unpriced_models) as a list of names, whatever form the engine gave."""
    if values is None or isinstance(values, float | str):
        return [] if not isinstance(values, str) else [values]
    return [str(value) for value in values if not missing(value)]


def worth_telling(run: Mapping[str, Any], steps: pd.DataFrame) -> bool:
    """A run with usage, a cost, a dollar or token budget, or a dollar or token exhaustion has
    a cost block; a run that carries none of these (an agent that sends no usage and has no
    such budget) has nothing to say about money."""
    if not has_costs(run):
        return False
    return bool(_count(run, "tokens") or _count(run, "cost_nano")
                or not missing(run.get("usd_budget_nano"))
                or not missing(run.get("token_budget"))
                or _flag(run, "usd_exhausted") or _flag(run, "tokens_exhausted")
                or not missing(run.get("reported_total_nano"))
                or (not steps.empty and "tokens" in steps and steps["tokens"].notna().any()))


def _stated(run: Mapping[str, Any], dimension: str) -> bool:
    outcome = run.get("outcome")
    return (not missing(outcome) and str(outcome).strip().lower() in ("exhausted", "partial")
            and run.get("exhausted_by") == dimension)


def _exhausted_without_budget(run: Mapping[str, Any], dimension: str, budget: str) -> str:
    """Why a run counts as exhausted in a dimension whose budget is unknown (§11.5)."""
    if _stated(run, dimension):
        return (f"the agent stated it ran out of its {budget} budget "
                f"(budget.run.exhausted_by {dimension})")
    return f"a step was refused for its {budget} budget (budget.refused_by {dimension})"


def spent_line(run: Mapping[str, Any]) -> str:
    """Spent of budget, over by, and why the cost is a lower bound when it is one."""
    complete = _flag(run, "cost_complete") or missing(run.get("cost_complete"))
    spent = usd_nano(run.get("cost_nano"), at_least=not complete)
    budget = run.get("usd_budget_nano")
    if missing(budget):
        if _flag(run, "usd_exhausted"):
            text = (f"{spent}; no dollar budget is known, but the run is dollar-exhausted: "
                    f"{_exhausted_without_budget(run, 'usd', 'dollar')}.")
        else:
            text = (f"{spent}; no dollar budget is known (no budget.total_usd on the run, none "
                    "declared for its agent).")
    else:
        kind = "its declared" if run.get("usd_budget_source") == "declared" else "a"
        share = percent(run.get("cost_utilisation"))
        text = (f"{spent} of {kind} {usd_nano(budget)} dollar budget"
                f" ({'≥ ' if not complete and share != NO_VALUE else ''}{share})")
        overrun = run.get("overrun_usd_nano")
        if not missing(overrun) and int(overrun) > 0:
            text += f", over by {usd_nano(overrun, at_least=not complete)}"
        if _flag(run, "usd_exhausted"):
            reached = int(run.get("cost_nano") or 0) >= int(budget)
            text += (": dollar-exhausted." if reached else
                     f": dollar-exhausted, {_exhausted_without_budget(run, 'usd', 'dollar')}.")
        else:
            text += "."
    if not complete:
        text += " " + incomplete_reason(run)
    return text


def incomplete_reason(run: Mapping[str, Any]) -> str:
    """Why the cost is a lower bound (§11.4): the unpriced models, the steps without usage."""
    parts = []
    models = _listed(run.get("unpriced_models"))
    if models:
        shown = ", ".join(short(model) for model in models[:5])
        more = f" and {len(models) - 5} more" if len(models) > 5 else ""
        parts.append(f"no price for {shown}{more} (budgetscope prices set MODEL --input X "
                     "--output X prices it)")
    elif _count(run, "unpriced_steps"):
        parts.append(f"{plural(_count(run, 'unpriced_steps'), 'step')} with an unpriced call "
                     "whose model is not named")
    billable = _count(run, "unmetered_billable_steps")
    if billable:
        parts.append(f"{plural(billable, 'model step')} sent no usage and may have been "
                     "billed")
    return ("A lower bound: " + "; ".join(parts) + ".") if parts else "A lower bound."


def _relation(culprit: Any, crosser: Any, culprit_key: Any, crosser_key: Any,
              spender: str) -> str:
    if missing(culprit) or missing(crosser):
        return ""
    if culprit == crosser:
        return f"It is also the {spender}: the same step."
    if culprit_key == crosser_key:
        return f"It is another call of the same step key, not the {spender} itself."
    return (f"It is not the {spender}: the step that crossed the line is not the one that "
            "spent the most.")


@dataclass(frozen=True)
class Dimension:
    """The columns of one budget dimension in the runs table (§11.5-§11.6)."""
    name: str  # usd or tokens
    word: str  # dollar or token
    budget: str
    culprit_span: str
    culprit_key: str
    culprit_step: str
    culprit_amount: str
    culprit_share: str
    crosser_span: str
    crosser_key: str
    crosser_step: str
    before: str
    after: str
    exhausted: str

    def amount(self, value: Any) -> str:
        return usd_nano(value) if self.name == "usd" else f"{count(value)} tokens"


USD = Dimension("usd", "dollar", "usd_budget_nano", "cost_culprit_span_id", "cost_culprit_key",
                "cost_culprit_step", "cost_culprit_nano", "cost_culprit_share",
                "cost_crosser_span_id", "cost_crosser_key", "cost_crosser_step",
                "cost_before_crossing_nano", "cost_after_crossing_nano", "usd_exhausted")
TOKENS = Dimension("tokens", "token", "token_budget", "token_culprit_span_id",
                   "token_culprit_key", "token_culprit_step", "token_culprit_tokens",
                   "token_culprit_share", "token_crosser_span_id", "token_crosser_key",
                   "token_crosser_step", "tokens_before_crossing", "tokens_after_crossing",
                   "tokens_exhausted")


def _step(run: Mapping[str, Any], number: str, key: str) -> str:
    return step_name(run.get(number), short(run.get(key)) if not missing(run.get(key)) else None)


def culprit_line(run: Mapping[str, Any], d: Dimension) -> tuple[str, str] | None:
    """(label, sentence) of the step that spent most in dimension `d`; None without one."""
    name = _step(run, d.culprit_step, d.culprit_key)
    if not name:
        return None
    exhausted = _flag(run, d.exhausted)
    label = ("Cost culprit" if d.name == "usd" else "Token culprit") if exhausted else \
        ("Spent most" if d.name == "usd" else "Used most")
    amount = d.amount(run.get(d.culprit_amount))
    if missing(run.get(d.culprit_share)):
        return label, f"{name}: {amount}, the most of any step."
    return label, (f"{name}: {percent(run.get(d.culprit_share))} of the {d.word} budget "
                   f"({amount}).")


def crosser_line(run: Mapping[str, Any], d: Dimension) -> tuple[str, str] | None:
    """(label, sentence) of the step whose call made the cumulative spend reach the budget,
    with the spend before and after that call; None when it was never reached."""
    before, after = run.get(d.before), run.get(d.after)
    if missing(after):
        return None
    label = "Crosser" if d.name == "usd" else "Token crosser"
    spent = f"{d.amount(before)} spent before it, {d.amount(after)} after"
    name = _step(run, d.crosser_step, d.crosser_key)
    if not name:
        return label, f"a call under no step reached the {d.word} budget: {spent}."
    spender = ("cost culprit" if d.name == "usd" else "token culprit") \
        if _flag(run, d.exhausted) else "largest spender"
    relation = _relation(run.get(d.culprit_span), run.get(d.crosser_span),
                         run.get(d.culprit_key), run.get(d.crosser_key), spender)
    return label, f"{name} reached the {d.word} budget: {spent}." + (
        f" {relation}" if relation else "")


def tokens_line(run: Mapping[str, Any]) -> str:
    """The run's tokens against its token budget, split as §11.1 counts them."""
    tokens = run.get("tokens")
    split = " / ".join(f"{word} {count(run.get(column))}" for word, column in (
        ("in", "input_tokens"), ("cache read", "cache_read_tokens"),
        ("cache write", "cache_write_tokens"), ("out", "output_tokens"),
        ("reasoning", "reasoning_tokens")))
    budget = run.get("token_budget")
    if missing(budget):
        head = f"{count(tokens)}"
        if _flag(run, "tokens_exhausted"):
            head += (f"; token-exhausted: "
                     f"{_exhausted_without_budget(run, 'tokens', 'token')}")
    else:
        kind = "its declared" if run.get("token_budget_source") == "declared" else "a"
        head = (f"{count(tokens)} of {kind} {count(budget)} token budget "
                f"({percent(run.get('token_utilisation'))})")
        overrun = run.get("overrun_tokens")
        if not missing(overrun) and int(overrun) > 0:
            head += f", over by {count(overrun)}"
        if _flag(run, "tokens_exhausted"):
            head += ", token-exhausted"
    return f"{head}: {split}."


def cost_answers(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The cost block as (label, sentence) pairs, in the order on-call reads them."""
    out: list[tuple[str, str]] = [("Spent", spent_line(run))]
    for line in (culprit_line(run, USD), crosser_line(run, USD)):
        if line is not None:
            out.append(line)
    unattributed = run.get("unattributed_cost_nano")
    if not missing(unattributed) and int(unattributed) > 0:
        out.append(("Unattributed", f"{usd_nano(unattributed)} spent by calls under no step."))
    reported = run.get("reported_total_nano")
    if not missing(reported):
        out.append(("Reported", f"{usd_nano(reported)} by the framework's own total (shown "
                                "beside the sum of the calls, never added to it)."))
    out.append(("Tokens", tokens_line(run)))
    for line in (culprit_line(run, TOKENS) if not missing(run.get("token_budget"))
                 or _flag(run, "tokens_exhausted") else None, crosser_line(run, TOKENS)):
        if line is not None:
            out.append(line)
    return out


@dataclass(frozen=True)
class StepCost:
    """One row of the run's steps with usage: its number and key, tokens, cost, and where the
    cost came from."""
    number: str  # "3", "3.2"
    level: int
    key: str
    tokens: str
    cost: str  # "$0.12", "≥ $0.12", "unknown" (unpriced), "no usage" (unmetered, may bill)
    source: str  # SOURCE_WORDS, "" for a step without usage


def step_costs(steps: pd.DataFrame) -> list[StepCost]:
    """The steps that carry usage or cost, and the model steps that sent no usage but may have
    been billed (§11.4), in waterfall order (queries.run_view.waterfall_order)."""
    if steps.empty or "tokens" not in steps:
        return []
    out = []
    for step in steps.itertuples(index=False):
        metered = not missing(step.tokens)
        billable = not missing(step.possibly_billed) and bool(step.possibly_billed)
        if not (metered or billable):
            continue
        if not metered:
            cost = "no usage"
        elif missing(step.cost_nano):
            cost = "unknown"
        else:
            complete = missing(step.cost_complete) or bool(step.cost_complete)
            cost = usd_nano(step.cost_nano, at_least=not complete)
        source = "" if missing(step.cost_source) else SOURCE_WORDS.get(
            str(step.cost_source), str(step.cost_source))
        out.append(StepCost(str(step.number), int(step.step_level), str(step.step_key),
                            count(step.tokens) if metered else "", cost, source))
    return out
