"""Runs for the operating tests (/metrics signals, `budgetscope check`), every number worked
by hand here. Times are ms after `t0_ns`, which the caller picks (inside the window it checks).

- R1, budget 10000, run [0,12000]: fetch [0,8000] ok, gpt [8000,12000] ok. Latest end 12000 >=
  d 10000: exhausted.
- R2, budget 10000, run [0,5000]: fetch [0,1000] HTTP 503 (upstream_error); save [1000,2000]
  a write, budget.outcome client_timeout (uncertain), key k-2; check [2000,3000] a reconcile
  step with key k-2, result landed. Not exhausted. The write is reconciled, so not an orphan.
- R3, no budget, run [0,2000]: fetch [0,1000] error.type ReadTimeout (client_timeout);
  post [1000,1500] a write with effect_status possible, key k-3, never read back: an orphan.

Totals: runs 3, budgeted 2, exhausted 1 → exhaustion_rate 1/2. Steps 2 + 3 + 2 = 7;
client_timeouts 2 (R2 save, R3 fetch) → 2/7; upstream_errors 1 (R2 fetch) → 1/7.
Write steps 2 (R2 save, R3 post); reconciled 1 → reconciliation_rate 1/2; orphan_writes 1.

`old_run` adds one exhausted run (budget 1000, run [0,2000], one tool step [0,2000] with HTTP
500) meant to be placed outside the window, so that a test can tell the window is applied.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from tests.support.trace_builder import TraceBuilder

EXPECTED = {
    "runs": 3, "budgeted_runs": 2, "exhausted_runs": 1, "exhaustion_rate": 1 / 2,
    "steps": 7, "client_timeouts": 2, "client_timeout_rate": 2 / 7,
    "upstream_errors": 1, "upstream_error_rate": 1 / 7,
    "write_steps": 2, "reconciled_writes": 1, "reconciliation_rate": 1 / 2,
    "orphan_writes": 1,
}


def ops_runs(t0_ns: int, seed: int = 11, service: str = "ops-agent") -> list[ReadableSpan]:
    b = TraceBuilder(seed=seed, service=service)

    def step(parent, kind: str, name: str, start: float, end: float, **attrs):
        return b.span(f"{kind} {name}", start, end, parent=parent, t0_ns=t0_ns,
                      attributes={"budget.step.kind": kind, "budget.step.name": name, **attrs})

    r1 = b.span("agent run", 0, 12_000, attributes={"budget.total_ms": 10_000}, t0_ns=t0_ns)
    step(r1, "tool", "fetch", 0, 8_000)
    step(r1, "model", "gpt", 8_000, 12_000)
    r2 = b.span("agent run", 0, 5_000, attributes={"budget.total_ms": 10_000}, t0_ns=t0_ns)
    step(r2, "tool", "fetch", 0, 1_000, **{"http.response.status_code": 503})
    step(r2, "tool", "save", 1_000, 2_000, **{
        "budget.side_effect": "write", "budget.outcome": "client_timeout",
        "budget.idempotency_key": "k-2"})
    step(r2, "reconcile", "check", 2_000, 3_000, **{
        "budget.idempotency_key": "k-2", "budget.reconcile.result": "landed"})
    r3 = b.span("agent run", 0, 2_000, t0_ns=t0_ns)
    step(r3, "tool", "fetch", 0, 1_000, **{"error.type": "ReadTimeout"})
    step(r3, "tool", "post", 1_000, 1_500, **{
        "budget.side_effect": "write", "budget.effect_status": "possible",
        "budget.idempotency_key": "k-3"})
    return b.finished()


def old_run(t0_ns: int, seed: int = 12, service: str = "ops-agent") -> list[ReadableSpan]:
    b = TraceBuilder(seed=seed, service=service)
    run = b.span("agent run", 0, 2_000, attributes={"budget.total_ms": 1_000}, t0_ns=t0_ns)
    b.span("tool slow", 0, 2_000, parent=run, t0_ns=t0_ns, attributes={
        "budget.step.kind": "tool", "budget.step.name": "slow",
        "http.response.status_code": 500})
    return b.finished()
