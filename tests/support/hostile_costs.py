"""Runs whose models are named as an attacker who can reach the OTLP port names them, with
usage, so that the names reach every cost output (docs/metrics.md §11): a model name of 10 KB
with terminal escapes and control characters that has no price (named among the unpriced
models), and a spreadsheet formula that reports a cost (the culprit and the crosser)."""

from __future__ import annotations

from pathlib import Path

from tests.support.hostile_names import ESCAPES, FORMULAS
from tests.support.trace_builder import TraceBuilder, open_db, store

# 10 KB of a name: escapes first, then NUL, a bidi override and a carriage return inside.
LONG_MODEL = ESCAPES + "m" * 5_000 + "\x00\u202e\r" + "n" * 5_000
FORMULA_MODEL = FORMULAS[0]


def _model(name: str, **more: object) -> dict[str, object]:
    return {"budget.step.kind": "model", "budget.step.name": name,
            "gen_ai.operation.name": "chat", "gen_ai.request.model": name, **more}


def hostile_costs_db(tmp_path: Path) -> tuple[str, str]:
    """The database and the run id of one run: B$ $0.01; #1 the long unpriced model (1000
    tokens in, 10 out), #2 the formula model reporting $0.02 (its culprit and crosser)."""
    b = TraceBuilder(seed=4343)
    run = b.run(0, 5_000, 10_000, gen__ai_agent_name="hostile-costs", budget_total__usd=0.01)
    b.span("chat long", 0, 1_000, parent=run, attributes=_model(
        LONG_MODEL, **{"gen_ai.usage.input_tokens": 1_000, "gen_ai.usage.output_tokens": 10}))
    b.span("chat formula", 1_000, 2_000, parent=run, attributes=_model(
        FORMULA_MODEL, **{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 5,
                          "budget.cost_usd": 0.02}))
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    return str(tmp_path / "test.duckdb"), b.trace_id(run)
