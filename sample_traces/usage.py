"""What each model call of the sample bills: its tokens, the model that answered, and the run's
token and dollar budgets.

Drawn from streams of its own (`latency.stream(seed, index, "usage", …)`), never from the plan's
or nature's, so usage changes no time number: the calls, their latencies and outcomes are what
they were without it. Only a call that answered (`ok`) reports usage; a failed or abandoned one
reports none (docs/metrics.md §11.4 then calls it unmetered).

The story it tells:
- conversations grow, and every turn after the first reads the part it shares with the previous
  turn from the provider's cache (OpenAI: prompts of 1,024 tokens and more, in steps of 128);
- now and then a run starts by reading a long document in full (a huge fresh input on its first
  call), later turns carry only its summary: that early call is the run's largest spender;
- the research agent's router sends its final synthesis to a reasoning model (o4-mini), whose
  output includes reasoning tokens;
- the triage bot's gateway answers its first, classifying call from a distilled model of its own
  that no public price table knows: unpriced;
- research runs from 3.3.0 and every support run state a dollar budget; support runs also a
  token budget.

`record_usage` is the one place that writes usage on an SDK step."""

from __future__ import annotations

from dataclasses import dataclass

from .latency import stream

OPENAI_CACHE_MIN, OPENAI_CACHE_STEP = 1_024, 128
# The model that answers the research agent's synthesis (its router's choice), and the triage
# bot's distilled classifier (unknown to every public price table).
SYNTHESIS_MODEL = "o4-mini-2025-04-16"
DISTILLED_MODEL = "triage-distill-v2"
RESPONSE_MODEL = {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"}

# How often a run reads a long document first, and how long it is (tokens), per agent.
_DOCUMENT = {"research-agent": (0.08, 60_000, 110_000), "support-agent": (0.04, 40_000, 70_000)}
# Dollar budgets (USD) stated on the run span, and the version they start from.
USD_BUDGET = {"research-agent": (0.30, "3.3.0"), "support-agent": (0.03, None)}
TOKEN_BUDGET = {"support-agent": 60_000}


@dataclass(frozen=True)
class Usage:
    """One call's usage in OTel GenAI's terms: input includes the cache read, output the
    reasoning."""

    input_tokens: int
    cache_read_tokens: int
    output_tokens: int
    reasoning_tokens: int
    response_model: str


def attributes(usage: Usage) -> dict[str, int | str]:
    values: dict[str, int | str] = {
        "gen_ai.response.model": usage.response_model,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        values["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.reasoning_tokens:
        values["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return values


def record_usage(step: object, usage: Usage) -> None:
    """Write a call's usage on its SDK step (the OTel GenAI attributes, through the step's
    set_attribute)."""
    for key, value in attributes(usage).items():
        step.set_attribute(key, value)  # type: ignore[attr-defined]


def run_budget_attributes(agent: str, version: str) -> dict[str, float | int]:
    """`budget.total_usd` and `budget.total_tokens` the run span states, if any."""
    values: dict[str, float | int] = {}
    usd = USD_BUDGET.get(agent)
    if usd is not None and (usd[1] is None or _version(version) >= _version(usd[1])):
        values["budget.total_usd"] = usd[0]
    if agent in TOKEN_BUDGET:
        values["budget.total_tokens"] = TOKEN_BUDGET[agent]
    return values


class Conversations:
    """A run's conversations (its own, and each subagent's, keyed by the span they run under):
    how much input each sent last, so the next turn reads that much from the cache."""

    def __init__(self, seed: int, index: int, agent: str) -> None:
        self.seed, self.index, self.agent = seed, index, agent
        self.last_input: dict[bytes, int] = {}
        chance, low, high = _DOCUMENT.get(agent, (0.0, 0, 0))
        rng = stream(seed, index, "usage", "document")
        reads, size = rng.random() < chance, rng.randint(low, high) if high else 0
        self.document_tokens = size if reads else 0

    def usage(self, conversation: bytes, top: bool, model: str, idx: int, attempt: int,
              plan_input: int, output_tokens: int, synthesis: bool) -> Usage:
        """The usage of one answered call in `conversation` (`top`: the run's own, not a
        subagent's). `plan_input` is the plan's context size; the run's first call reads the
        whole document besides, when the run has one (later turns carry its summary)."""
        rng = stream(self.seed, self.index, "usage", idx, attempt)
        fresh_turn = rng.randint(40, 400)  # the tool results and instructions added this turn
        previous = self.last_input.get(conversation)
        first_call = top and previous is None
        input_tokens = plan_input + fresh_turn
        document = self.document_tokens if first_call else 0
        cached = 0
        if previous is not None and previous >= OPENAI_CACHE_MIN:
            cached = min(previous, input_tokens) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
        self.last_input[conversation] = input_tokens
        reasoning = 0
        response_model = RESPONSE_MODEL[model]
        if synthesis:
            response_model = SYNTHESIS_MODEL
            reasoning = int(output_tokens * rng.uniform(0.35, 0.7))
        elif self.agent == "triage-agent" and first_call:
            response_model = DISTILLED_MODEL
        return Usage(input_tokens + document, cached, output_tokens, reasoning, response_model)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))
