"""A small fleet of runs that spend tokens and dollars, for the cost reports' tests: every figure
worked by hand here (docs/metrics.md §11). Times in ms from each run's start; T0 = Monday
2026-11-23 10:00 UTC (ISO week 2026-W48). Costs are reported on the calls (`budget.cost_usd`)
unless said otherwise, so that the arithmetic is the report's, not a price table's.

Declared (before the spans arrive): agent `shop` --usd 0.20 --usd-per-week 0.50; the default
--usd-per-week 1. A price of your own: `ft:gpt-4o-mini:acme:*` at $1 input, $2 output per
million tokens.

- C1 shop, T0, budget.total_usd 0.50 and budget.total_tokens 100000 on the run (span budgets
  win over the declared $0.20), run [0, 32000]. docs/metrics.md §11.6's worked example:
  #1 model:gpt-4o [0, 20000] $0.30, input 120000, output 500
  #2 tool:search [20000, 24000], no usage
  #3 model:gpt-4o-mini [24000, 27000] $0.12, input 3000 (cache read 1000 of it), output 400
  #4 model:gpt-4o-mini [27000, 31000] $0.09, input 2000, output 300 (reasoning 100 of it)
  tokens 120500 + 3400 + 2300 = 126200: input 125000, cache read 1000, cache write 0,
  output 1200, reasoning 100. cost $0.51 ≥ $0.50: dollar-exhausted, utilisation 1.02, overrun
  $0.01. Cost culprit #1 model:gpt-4o, 0.30 / 0.50 = 0.6; by end the cumulative cost is 0.30
  (at 20000), 0.42 (27000), 0.51 (31000): the crosser is #4, $0.42 before it, $0.51 after.
  Tokens 126200 ≥ 100000: token-exhausted, utilisation 1.262, overrun 26200; token culprit #1
  (120500, share 1.205), also the token crosser: 0 before it, 120500 after.
- C2 shop, T0+1h, no budget on the run: B$ = the declared $0.20; run [0, 8000].
  #1 model:gpt-4o [0, 5000] $0.05, input 1000, output 200 (1200 tokens)
  #2 model:acme-secret [5000, 6000] no cost, no price: unpriced; input 1000, output 100 (1100)
  #3 model:gpt-4o [6000, 7000] ok, no usage: unmetered, possibly billed
  #4 model:ft:gpt-4o-mini:acme:v1 [7000, 7500], input 1000, output 500, priced by your price:
     1000 × $1/M + 500 × $2/M = $0.002 (2000000 nano-dollars)
  tokens 1200 + 1100 + 1500 = 3800; cost ≥ $0.052 (incomplete: 1 unpriced step, acme-secret;
  1 unmetered billable step); utilisation 0.052 / 0.20 = 0.26; not exhausted; culprit (the
  largest spender) #1 model:gpt-4o, 0.05 / 0.20 = 0.25. No token budget: no token culprit
  (§11.6 defines culprits for a run with a budget in that dimension).
- C3 batch, T0-7d (2026-W47), budget.total_usd 0.50; the run span reports a framework total
  `budget.cost_usd` 0.99 (an aggregate: never added, reported_total_usd 0.99); run [0, 13000].
  #1 model:claude [0, 10000] $0.40, input 1000, output 100
  #2 model:claude [100, 12000] $0.35, input 2000, output 200 (in parallel with #1: both pay in
     full)
  a span `summarise` under the run, in no step [12500, 12600]: $0.01, input 50, output 10:
     unattributed spend
  tokens 1100 + 2200 + 60 = 3360; cost 0.40 + 0.35 + 0.01 = $0.76 ≥ $0.50: dollar-exhausted,
  utilisation 1.52, overrun $0.26, unattributed $0.01. Cost culprit #1 (0.8); by end: 0.40
  (10000), 0.75 (12000) ≥ 0.50: the crosser is #2, another call of the same step key; $0.40
  before it, $0.75 after.
- C4 batch, T0+2h, no dollar budget anywhere (batch declares none, nor does the default);
  run [0, 3000]:
  #1 model:claude [0, 1000] $0.02, input 500, output 50
  #2 model:claude [1000, 1000] refused by the gateway (error.type BudgetExceededError): refused
     with refused_by usd (§3 rule 1b), presumed unbilled
  dollar-exhausted by the refusal with no known budget (§11.5): budgeted in dollars, but no
  utilisation, culprit or crosser. tokens 550, cost $0.02.

Weekly: W48 shop (C1, C2): cost 0.51 + 0.052 = $0.562, weekly budget $0.50 → 1.124;
W48 batch (C4): $0.02 of the default $1 → 0.02; W47 batch (C3): $0.76 of $1 → 0.76.
"""

from __future__ import annotations

from typing import Any

import duckdb
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from store import Change, PriceChange, apply, apply_price
from tests.support.trace_builder import T0_NS, TraceBuilder, store

HOUR_NS = 3_600 * 10**9
WEEK_NS = 7 * 24 * HOUR_NS


def _model(name: str, *, cost: float | None = None, input_tokens: int | None = None,
           output_tokens: int | None = None, **more: Any) -> dict[str, Any]:
    """A model step's attributes: OTel GenAI usage, the model it priced by, a reported cost."""
    attributes: dict[str, Any] = {"budget.step.kind": "model", "budget.step.name": name,
                                  "gen_ai.operation.name": "chat",
                                  "gen_ai.request.model": name, **more}
    if input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = output_tokens
    if cost is not None:
        attributes["budget.cost_usd"] = cost
    return attributes


# The fleet's declarations as `budgetscope` arguments (for a backend the CLI declares on).
DECLARATIONS = [["budgets", "set", "shop", "--usd", "0.20", "--usd-per-week", "0.50"],
                ["budgets", "set", "--default", "--usd-per-week", "1"],
                ["prices", "set", "ft:gpt-4o-mini:acme:*", "--input", "1", "--output", "2"]]


# DECLARATIONS as `budgets set` and `prices set` store them, line for line.
CHANGES = (Change("set", "shop", usd_nano=200_000_000, usd_per_week_nano=500_000_000),
           Change("set_default", None, usd_per_week_nano=1_000_000_000),
           PriceChange("set", "ft:gpt-4o-mini:acme:*", input_rate=10**12,
                       output_rate=2 * 10**12))


def declare(con: duckdb.DuckDBPyConnection) -> None:
    """The fleet's declarations (the module's docstring, DECLARATIONS), stored as `budgets
    set` and `prices set` store them."""
    for change in CHANGES:
        if isinstance(change, PriceChange):
            apply_price(con, change)
        else:
            apply(con, change)


def build_cost_fleet(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Declare, then store the four runs; their run ids (trace ids) by name."""
    declare(con)
    spans, ids = cost_fleet_spans()
    store(con, spans)
    return ids


def cost_fleet_spans() -> tuple[list[ReadableSpan], dict[str, str]]:
    """The four runs' spans, made with the real OpenTelemetry SDK, and their run ids."""
    b = TraceBuilder(seed=43)
    ids: dict[str, str] = {}

    def run(name: str, t0: int, end: int, agent: str, **attributes: Any):  # type: ignore[no-untyped-def]
        span = b.span("agent run", 0, end, t0_ns=t0, service=f"{agent}-svc",
                      attributes={"gen_ai.agent.name": agent, "budget.total_ms": 60_000,
                                  **attributes})
        ids[name] = b.trace_id(span)
        return span

    def step(parent, name: str, start: float, end: float, t0: int, agent: str,  # type: ignore[no-untyped-def]
             attributes: dict[str, Any], **options: Any):
        return b.span(name, start, end, parent=parent, t0_ns=t0, service=f"{agent}-svc",
                      attributes=attributes, kind=SpanKind.CLIENT, **options)

    t = T0_NS
    c1 = run("C1", t, 32_000, "shop", **{"budget.total_usd": 0.5,
                                          "budget.total_tokens": 100_000})
    step(c1, "chat gpt-4o", 0, 20_000, t, "shop",
         _model("gpt-4o", cost=0.30, input_tokens=120_000, output_tokens=500))
    step(c1, "search", 20_000, 24_000, t, "shop",
         {"budget.step.kind": "tool", "budget.step.name": "search"})
    step(c1, "chat gpt-4o-mini a", 24_000, 27_000, t, "shop",
         _model("gpt-4o-mini", cost=0.12, input_tokens=3_000, output_tokens=400,
                **{"gen_ai.usage.cache_read.input_tokens": 1_000}))
    step(c1, "chat gpt-4o-mini b", 27_000, 31_000, t, "shop",
         _model("gpt-4o-mini", cost=0.09, input_tokens=2_000, output_tokens=300,
                **{"gen_ai.usage.reasoning.output_tokens": 100}))

    t = T0_NS + HOUR_NS
    c2 = run("C2", t, 8_000, "shop")
    step(c2, "chat gpt-4o", 0, 5_000, t, "shop",
         _model("gpt-4o", cost=0.05, input_tokens=1_000, output_tokens=200))
    step(c2, "chat acme-secret", 5_000, 6_000, t, "shop",
         _model("acme-secret", input_tokens=1_000, output_tokens=100))
    step(c2, "chat gpt-4o silent", 6_000, 7_000, t, "shop", _model("gpt-4o"))
    step(c2, "chat fine-tuned", 7_000, 7_500, t, "shop",
         _model("ft:gpt-4o-mini:acme:v1", input_tokens=1_000, output_tokens=500))

    t = T0_NS - WEEK_NS
    c3 = run("C3", t, 13_000, "batch", **{"budget.total_usd": 0.5, "budget.cost_usd": 0.99})
    step(c3, "chat claude a", 0, 10_000, t, "batch",
         _model("claude", cost=0.40, input_tokens=1_000, output_tokens=100))
    step(c3, "chat claude b", 100, 12_000, t, "batch",
         _model("claude", cost=0.35, input_tokens=2_000, output_tokens=200))
    b.span("summarise", 12_500, 12_600, parent=c3, t0_ns=t, service="batch-svc",
           attributes={"gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 10,
                       "budget.cost_usd": 0.01})

    t = T0_NS + 2 * HOUR_NS
    c4 = run("C4", t, 3_000, "batch")
    step(c4, "chat claude", 0, 1_000, t, "batch",
         _model("claude", cost=0.02, input_tokens=500, output_tokens=50))
    step(c4, "chat claude refused", 1_000, 1_000, t, "batch",
         _model("claude", **{"error.type": "BudgetExceededError"}), error=True,
         status_message="budget exceeded")
    return b.finished(), ids
