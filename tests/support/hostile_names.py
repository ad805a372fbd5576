"""Runs whose agents, tools and keys are named as an attacker who can reach the OTLP port
names them: spreadsheet formulas, a carriage return, terminal escape sequences."""

from __future__ import annotations

from pathlib import Path

from tests.support.trace_builder import TraceBuilder, open_db, store

# Names an attacker who can reach the OTLP port gives an agent or a tool.
FORMULAS = ["=HYPERLINK(\"http://evil\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3",
            "@SUM(A1:A2)", "\tHYPERLINK", "\r=1+1"]
SPLIT = "two\rrows"
# Window title, screen clear, a hyperlink, C1 CSI, a carriage return that hides the line start.
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\x9b31m\rx"


def hostile_names_db(tmp_path: Path) -> tuple[str, list[str]]:
    b = TraceBuilder(seed=14)
    run_ids = []
    for i, name in enumerate([*FORMULAS, SPLIT, ESCAPES]):
        run = b.run(i * 20_000, i * 20_000 + 12_000, 10_000, gen__ai_agent_name=name,
                    budget_run_outcome="exhausted")
        b.step(run, "tool", name, i * 20_000, i * 20_000 + 11_000,
               **{"budget.outcome": "client_timeout", "budget.side_effect": "write",
                  "budget.idempotency_key": name})
        run_ids.append(b.trace_id(run))
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    return str(tmp_path / "test.duckdb"), run_ids
