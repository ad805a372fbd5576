"""A small fleet of runs for report tests, every number worked by hand in the docstring.

Runs (times in ms from each run's own start; T0 = Monday 2026-11-23 10:00 UTC):
- A1 alpha, T0, B 10000, run [0,12000]: fetch [0,8000] ok, gpt [8000,12000] ok.
  e = 10000 → fetch 8000, gpt 2000 (clipped), unattributed 0. Latest end 12000 >= d:
  exhausted. culprit fetch; holder gpt (8000 < d 10000 <= 12000). utilisation 1.2.
- A2 alpha, T0+1h, B 10000, run [0,5000]: fetch [0,1000] HTTP 503, gpt [1000,4000] ok.
  Not exhausted. utilisation 0.5.
- A3 alpha, T0+2h, B 20000, outcome exhausted, run [0,20000]: gpt [0,15000] ok,
  fetch [15000,20000] budget.outcome client_timeout. gpt 15000, fetch 5000. culprit gpt;
  holder fetch (15000 < d 20000 <= 20000). utilisation 1.0.
- B1 beta-svc (service.name, no agent name), T0-7d (2026-W47), B 10000, run [0,10000]:
  search [0,6000] ok, report refused at 6000 (zero length). search 6000, report 0,
  unattributed 4000. Exhausted by the refused step. culprit search; holder: nothing active at
  d, last to start before the run ended = report. utilisation 1.0.
- N1 alpha, T0+3h, no budget, run [0,2000]: fetch [0,1000] error.type ReadTimeout.
"""

from __future__ import annotations

import duckdb

from tests.support.trace_builder import T0_NS, TraceBuilder, store

HOUR_NS = 3_600 * 10**9
WEEK_NS = 7 * 24 * HOUR_NS


def build_fleet(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    b = TraceBuilder(seed=7)
    ids = {}

    def run(name: str, t0: int, end: int, budget: int | None, agent: str | None,
            service: str = "alpha-svc", **extra):
        attrs = dict(extra)
        if budget is not None:
            attrs["budget.total_ms"] = budget
        if agent:
            attrs["gen_ai.agent.name"] = agent
        span = b.span("agent run", 0, end, attributes=attrs, t0_ns=t0, service=service)
        ids[name] = b.trace_id(span)
        return span

    def step(parent, kind, name, start, end, t0, service="alpha-svc", **attrs):
        return b.span(f"{kind} {name}", start, end, parent=parent, t0_ns=t0, service=service,
                      attributes={"budget.step.kind": kind, "budget.step.name": name, **attrs})

    t = T0_NS
    a1 = run("A1", t, 12_000, 10_000, "alpha")
    step(a1, "tool", "fetch", 0, 8_000, t)
    step(a1, "model", "gpt", 8_000, 12_000, t)
    t = T0_NS + HOUR_NS
    a2 = run("A2", t, 5_000, 10_000, "alpha")
    step(a2, "tool", "fetch", 0, 1_000, t, **{"http.response.status_code": 503})
    step(a2, "model", "gpt", 1_000, 4_000, t)
    t = T0_NS + 2 * HOUR_NS
    a3 = run("A3", t, 20_000, 20_000, "alpha", **{"budget.run.outcome": "exhausted"})
    step(a3, "model", "gpt", 0, 15_000, t)
    step(a3, "tool", "fetch", 15_000, 20_000, t, **{"budget.outcome": "client_timeout"})
    t = T0_NS - WEEK_NS
    b1 = run("B1", t, 10_000, 10_000, None, service="beta-svc")
    step(b1, "tool", "search", 0, 6_000, t, service="beta-svc")
    step(b1, "tool", "report", 6_000, 6_000, t, service="beta-svc",
         **{"budget.outcome": "refused"})
    t = T0_NS + 3 * HOUR_NS
    n1 = run("N1", t, 2_000, None, "alpha")
    step(n1, "tool", "fetch", 0, 1_000, t, **{"error.type": "ReadTimeout"})
    store(con, b.finished())
    return ids
