"""Validation of the timeout-policy replay against the sample-trace generator.

The generator draws every call's latency and failure from a stream keyed by (seed, run, step,
attempt), never from the policy (sample_traces/latency.py), so the same seed under two policies
is the same world handled two ways. Policy A is the baseline; policy B halves every cap
(capping the research agent's fetch_report too) and cuts every budget to 75%. Simulating B on
A's stored traces must land near what B's own traces say happened, and simulating A on B's
traces (the looser direction) must bracket it.

Tolerances, from what the model can and cannot know (not from tuning the seed):
- exhaustion (tighter direction): within 0.03 absolute of B's actual rate, pooled over agents.
  Not exact because the replay cannot see agent reactions to a new timeout other than its
  timing: a summarizer subagent whose nested calls got faster under B, reconciliation reads
  after newly uncertain writes, a model timeout failing the run; on this seed they move a few
  runs in a hundred.
- per-step client-timeout rate: within 0.015 absolute for tool, model and queue steps with at
  least 100 calls. Calls that newly time out are retried with latencies drawn from the fit,
  and a nested-retry tool's duration is treated as one call: ~1 call in 100 differs.
  Subagents are left out of the comparison: a subagent's duration is the sum of its nested
  calls, which B caps tighter too, and the replay re-times top-level steps only, so it keeps
  the subagent's recorded duration (on this seed it predicts 3.4% summarizer timeouts where B
  had 0.8%: a known limit, shown in the tools table like any other figure).
- the looser direction: the replay cannot extend a record that ended early, so its exhaustion
  rate is a lower bound and `exhaustion_rate_upper` (those runs counted as exhausted) an upper
  bound; A's actual rate must lie in [lower - 0.01, upper + 0.01].
All the runs are shared by both sides, so these are model error, not sampling noise.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from ingest.files.loader import load_files
from queries.filters import Filters
from sample_traces.generate import write
from sample_traces.policy import BASELINE, AgentBudget, Policy
from simulation.data import simulate
from simulation.policy import SimulationPolicy
from store import connect

# slow, left out of make test-fast: its module fixture generates and replays whole worlds
# (18 s of set-up on 2 loaded cores).
pytestmark = pytest.mark.slow

RUNS = 500  # ~7 s to generate and ingest per policy on 2 busy cores
SEED = 11
CAP_FACTOR, BUDGET_FACTOR = 0.5, 0.75
EXHAUSTION_TOLERANCE = 0.03
TIMEOUT_RATE_TOLERANCE = 0.015
MIN_CALLS = 100


def tighter(policy: Policy) -> Policy:
    # The research agent's uncapped fetch_report gets a cap too (half the billing agent's).
    scaled = policy.with_caps_scaled("B", CAP_FACTOR, {"research-agent:fetch_report": 7_500})
    budgets = {agent: AgentBudget(int(b.total_ms * BUDGET_FACTOR), b.reserve_ms)
               for agent, b in policy.budgets.items() if b.total_ms is not None}
    return replace(scaled, budgets=budgets)


POLICY_A = BASELINE
POLICY_B = tighter(POLICY_A)
STEP_NAMES = sorted({name.split(":")[-1] for name in BASELINE.caps_ms})


def as_simulation(policy: Policy, agent: str) -> SimulationPolicy:
    """The generator's policy for one agent as `simulate` options (caps per step name; the
    replay runs one agent at a time, so agent-specific caps apply)."""
    caps = []
    for name in STEP_NAMES:
        cap = policy.cap_ms(agent, name)
        caps.append(f"{name}={'none' if cap is None else f'{cap}ms'}")
    return SimulationPolicy.parse(caps, f"{policy.budget(agent).total_ms}ms",
                                  f"{policy.min_start_ms}ms", policy.retries)


def build(tmp: Path, policy: Policy) -> str:
    traces, db = tmp / f"{policy.name}.jsonl", tmp / f"{policy.name}.duckdb"
    write(traces, runs=RUNS, seed=SEED, policy=policy)
    con = connect(db)
    try:
        summary = load_files(con, [traces], derive=True)
        assert not summary.rejections
    finally:
        con.close()
    return str(db)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("simulation_ab")
    return {"A": build(tmp, POLICY_A), "B": build(tmp, POLICY_B)}


def replay_per_agent(db: str, policy: Policy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each agent simulated under its own budget (the policy's deadline is one number), then
    pooled: summary counts summed, tools rows summed per step key."""
    con = connect(db, read_only=True)
    try:
        summaries, tools = [], []
        for agent in policy.budgets:
            result = simulate(con, as_simulation(policy, agent), Filters(agent=agent))
            summaries.append(result.summary.set_index("metric")[["actual", "predicted"]])
            tools.append(result.tools[["step_key", "calls_actual", "timeouts_actual", "calls",
                                       "timeouts"]])
    finally:
        con.close()
    return pd.concat(summaries, keys=list(policy.budgets)), pd.concat(tools)


def pooled_rate(summary: pd.DataFrame, column: str, metric: str = "exhaustion_rate") -> float:
    budgeted = summary.xs("budgeted_runs", level=1)["actual"].astype(float)
    rate = summary.xs(metric, level=1)[column].astype(float)
    return float((rate * budgeted).sum() / budgeted.sum())


def observed(db: str) -> tuple[float, pd.DataFrame]:
    con = connect(db, read_only=True)
    try:
        result = simulate(con, SimulationPolicy())
    finally:
        con.close()
    rows = result.summary.set_index("metric")
    # The identity replay is exact: predicted equals actual on every figure.
    assert list(rows["predicted"]) == list(rows["actual"])
    return float(rows.loc["exhaustion_rate", "actual"]), result.tools.set_index("step_key")


def test_tighter_policy_predicted_from_looser_traces(worlds: dict[str, str]) -> None:
    b_exhaustion, b_tools = observed(worlds["B"])
    summary, tools = replay_per_agent(worlds["A"], POLICY_B)
    predicted = pooled_rate(summary, "predicted")
    a_exhaustion = pooled_rate(summary, "actual")
    print(f"exhaustion A {a_exhaustion:.4f}, B actual {b_exhaustion:.4f}, "
          f"B predicted from A {predicted:.4f}")
    assert b_exhaustion > a_exhaustion + 0.05  # the policies differ enough to matter
    assert predicted == pytest.approx(b_exhaustion, abs=EXHAUSTION_TOLERANCE)

    per_key = tools.groupby("step_key")[["calls", "timeouts"]].sum()
    compared = 0
    for key, row in per_key.iterrows():
        actual_row = b_tools.loc[key] if key in b_tools.index else None
        if (actual_row is None or actual_row["calls_actual"] < MIN_CALLS
                or key.startswith("subagent:")):
            continue
        rate = row["timeouts"] / row["calls"]
        truth = actual_row["timeouts_actual"] / actual_row["calls_actual"]
        print(f"{key}: predicted {rate:.4f}, actual {truth:.4f}")
        assert rate == pytest.approx(truth, abs=TIMEOUT_RATE_TOLERANCE), key
        compared += 1
    assert compared >= 10


def test_looser_policy_is_bracketed(worlds: dict[str, str]) -> None:
    a_exhaustion, _ = observed(worlds["A"])
    summary, _ = replay_per_agent(worlds["B"], POLICY_A)
    lower = pooled_rate(summary, "predicted")
    upper = pooled_rate(summary, "predicted", "exhaustion_rate_upper")
    print(f"A actual {a_exhaustion:.4f}; predicted from B in [{lower:.4f}, {upper:.4f}]")
    assert lower - 0.01 <= a_exhaustion <= upper + 0.01
    assert upper - lower < 0.2  # the bracket says something
