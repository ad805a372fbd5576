"""The timeout-policy replay (simulation/) on hand-worked runs stored
through the real ingest path, plus its arithmetic: the run-level formula, the censored fit and
the normal functions it rests on.

The two runs (budget 10 s, reserve 0, every step reports budget.remaining_ms; times in ms):
  R1: fetch 100-3100 ok (cap 5000) · search 3200-5200 client_timeout (cap 2000, cut at
      2000) · gpt 5300-8300 ok (no cap: allocated = remaining) · run ends 8500.
  R2: fetch 100-1100 ok · fetch 1200-2200 ok · run ends 2300.
fetch has three exact latencies (3000, 1000, 1000): a fit; search (none exact) and gpt (one)
have none, so a search call beyond its 2000 ms cut is assumed to run into any limit.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from queries.filters import Filters
from queries.loader import TooManyRows, arrow_frame, frame, rows_at_most
from queries.render import to_csv_bytes
from simulation.data import simulate, simulation_runs, simulation_steps
from simulation.fit import (
    LognormalFit,
    fit_lognormal,
    inverse_cdf,
    normal_sf,
    run_level_probability,
)
from simulation.policy import PolicyError, SimulationPolicy, parse_duration_ms
from simulation.replay import prepare, replay
from tests.support.trace_builder import TraceBuilder, open_db, store


def _tool(b: TraceBuilder, run, kind: str, name: str, start: float, end: float,  # noqa: ANN001
          remaining: int, cap: int | None, outcome: str = "ok") -> None:
    attrs: dict[str, object] = {"budget.remaining_ms": remaining, "budget.outcome": outcome,
                                "budget.allocated_ms": min(cap or remaining, remaining)}
    if cap is not None:
        attrs["budget.cap_ms"] = cap
    b.step(run, kind, name, start, end, **attrs)


def build_hand(con) -> list[str]:  # noqa: ANN001
    b = TraceBuilder(seed=7)
    r1 = b.run(0, 8_500, 10_000, gen_ai_agent_name="alpha")
    _tool(b, r1, "tool", "fetch", 100, 3_100, 9_900, 5_000)
    _tool(b, r1, "tool", "search", 3_200, 5_200, 6_800, 2_000, "client_timeout")
    _tool(b, r1, "model", "gpt", 5_300, 8_300, 4_700, None)
    r2 = b.run(60_000, 62_300, 10_000, gen_ai_agent_name="alpha")
    _tool(b, r2, "tool", "fetch", 60_100, 61_100, 9_900, 5_000)
    _tool(b, r2, "tool", "fetch", 61_200, 62_200, 8_800, 5_000)
    store(con, b.finished())
    return [b.trace_id(r1), b.trace_id(r2)]


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    con = open_db(tmp_path_factory.mktemp("simulation"))
    ids = build_hand(con)
    yield con, ids
    con.close()


@pytest.fixture(scope="module")
def hand_db(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("simulation_cli")
    con = open_db(folder)
    build_hand(con)
    con.close()
    return str(folder / "test.duckdb")


def summary(result) -> dict[str, tuple[object, object, float]]:  # noqa: ANN001
    return {row.metric: (row.actual, row.predicted, row.fit_share)
            for row in result.summary.itertuples()}


def tools(result) -> dict[str, dict[str, object]]:  # noqa: ANN001
    return {row["step_key"]: row for row in result.tools.to_dict("records")}


def utilisation(result, run_id: str) -> float:  # noqa: ANN001
    runs = result.runs.set_index("run_id")
    return float(runs.loc[run_id, "utilisation"])


def test_worked_example_six_calls_at_six_percent():
    # A six-call task where each call times out 6% of the time: 1 - 0.94^6 = 0.3101 → ~31%.
    assert run_level_probability(0.06, 6) == pytest.approx(0.310, abs=0.0005)
    assert round(float(run_level_probability(0.06, 6)) * 100) == 31
    assert run_level_probability(0.0, 6) == 0.0
    assert run_level_probability(1.0, 1) == 1.0


def test_record_replays_to_itself(hand):
    con, ids = hand
    result = simulate(con, SimulationPolicy())
    for metric, (actual, predicted, fit_share) in summary(result).items():
        assert actual == predicted or (actual != actual and predicted != predicted), metric
        assert fit_share == 0.0, metric
    assert utilisation(result, ids[0]) == pytest.approx(0.85)
    assert utilisation(result, ids[1]) == pytest.approx(0.23)


def test_tighter_cap_replays_exactly(hand):
    con, ids = hand
    result = simulate(con, SimulationPolicy.parse(["fetch=2500ms"], retries=False))
    # R1: fetch 3000 > 2500 → gives up at 2500 (100 → 2600); search again cut at its 2000 cap
    # (2700 → 4700); gpt 3000 exact (4800 → 7800); teardown 200 → run ends 8000.
    assert utilisation(result, ids[0]) == pytest.approx(0.8)
    assert utilisation(result, ids[1]) == pytest.approx(0.23)  # 1000 ms calls fit under 2500
    fetch = tools(result)["tool:fetch"]
    assert (fetch["calls"], fetch["timeouts"], fetch["timeouts_actual"]) == (3, 1, 0)
    assert fetch["timeout_rate"] == pytest.approx(1 / 3)
    assert fetch["cap_ms"] == 2500
    # calls per run: 3 fetch calls over 2 runs → n = 1.5; 1 - (2/3)^1.5 = 0.455700; replayed:
    # one of the two runs has a fetch timeout.
    assert fetch["calls_per_run"] == pytest.approx(1.5)
    assert fetch["run_timeout_rate_formula"] == pytest.approx(1 - (2 / 3) ** 1.5)
    assert fetch["run_timeout_rate"] == pytest.approx(0.5)
    assert fetch["fit_calls"] == 0 and not fetch["rests_on_fit"]
    rows = summary(result)
    assert rows["client_timeouts"][:2] == (1, 2)
    assert rows["runs_with_client_timeout"][:2] == (1, 1)
    assert rows["exhausted_runs"][:2] == (0, 0)
    assert rows["calls"][2] == 0.0  # nothing rests on the fit


def test_shorter_deadline_cuts_the_waiting_call(hand):
    con, ids = hand
    result = simulate(con, SimulationPolicy.parse(deadline="7s", retries=False))
    # R1: gpt starts at 5300 with 1700 ms left and needs 3000: cut at the deadline (7000),
    # teardown 200 → 7200 / 7000. R2 ends 2300 / 7000.
    assert utilisation(result, ids[0]) == pytest.approx(7200 / 7000)
    assert utilisation(result, ids[1]) == pytest.approx(2300 / 7000)
    rows = summary(result)
    assert rows["exhausted_runs"][:2] == (0, 1)
    assert rows["exhaustion_rate"][1] == pytest.approx(0.5)
    assert tools(result)["model:gpt"]["timeouts"] == 1


def test_min_start_refuses_and_ends_the_run(hand):
    con, ids = hand
    result = simulate(con, SimulationPolicy.parse(deadline="8s", min_start="5s",
                                                  retries=False))
    # R1: fetch at 100 has 7900 left: starts. search at 3200 has 4800 < 5000: refused, the run
    # stops (gpt never starts); refusal ~0 ms + teardown 200 → 3400 / 8000.
    assert utilisation(result, ids[0]) == pytest.approx(3400 / 8000, abs=1e-4)
    by_key = tools(result)
    assert (by_key["tool:search"]["refused"], by_key["tool:search"]["calls"]) == (1, 0)
    assert by_key["model:gpt"]["calls"] == 0
    rows = summary(result)
    assert rows["refused"][:2] == (0, 1)
    assert rows["exhausted_runs"][1] == 1


def test_cap_above_the_cut_rests_on_the_fit(hand):
    con, ids = hand
    # search was cut at 2000 and has no completed call to fit: beyond 2000 its latency is
    # unknown and assumed to reach any limit, so it times out at 3000 (3200 → 6200), gpt runs
    # 6300 → 9300, the run ends 9500; the figure is marked as resting on the fit.
    result = simulate(con, SimulationPolicy.parse(["search=3s"], retries=False))
    assert utilisation(result, ids[0]) == pytest.approx(0.95)
    search = tools(result)["tool:search"]
    assert (search["timeouts"], search["fit_calls"], search["rests_on_fit"]) == (1, 1, True)
    assert summary(result)["exhaustion_rate"][2] == pytest.approx(0.5)  # one run of two


def test_new_retries_add_calls_from_the_fit(hand):
    con, ids = hand
    without = simulate(con, SimulationPolicy.parse(["fetch=2500ms"], retries=False))
    with_retries = simulate(con, SimulationPolicy.parse(["fetch=2500ms"], retries=True))
    fetch = tools(with_retries)["tool:fetch"]
    # R1's fetch now times out and is retried (up to 3 attempts) with latencies drawn from
    # fetch's fit: more calls, more time, resting on the fit.
    assert fetch["calls"] > 3 and fetch["fit_calls"] >= 2 and fetch["rests_on_fit"]
    assert utilisation(with_retries, ids[0]) > utilisation(without, ids[0]) + 0.025


def test_filters_select_runs(hand):
    con, ids = hand
    later = Filters.parse("2026-11-23T10:00:30Z")
    result = simulate(con, SimulationPolicy(), later)
    assert list(result.runs["run_id"]) == [ids[1]]
    assert simulate(con, SimulationPolicy(), Filters(agent="beta")).summary.loc[0, "actual"] == 0


def test_replay_never_needs_a_connection(hand):
    con, _ = hand
    runs, steps = simulation_runs(con), simulation_steps(con)
    prepared = prepare(runs, steps)
    a = replay(prepared, SimulationPolicy.parse(["fetch=2500ms"]))
    b = replay(prepared, SimulationPolicy.parse(["fetch=2500ms"]))
    pd.testing.assert_frame_equal(a.summary, b.summary)  # seeded: the same world every time


def test_steps_come_as_arrow_with_the_values_of_the_pandas_read(hand):
    # simulation_steps reads through Arrow (queries.loader.arrow_frame): the same rows and
    # values as the pandas read, NULL as NA, and the same replay from either.
    con, _ = hand
    parameters = Filters().parameters()
    arrow, plain = (read(con, "simulation_steps", parameters) for read in (arrow_frame, frame))
    assert all(isinstance(dtype, pd.ArrowDtype) for dtype in arrow.dtypes)
    assert list(arrow.columns) == list(plain.columns) and len(arrow) == len(plain) == 5
    order = ["run_index", "start_offset_ns"]
    arrow, plain = (f.sort_values(order, ignore_index=True) for f in (arrow, plain))
    for column in plain.columns:
        assert arrow[column].astype(object).where(arrow[column].notna(), None).tolist() == \
            plain[column].astype(object).where(plain[column].notna(), None).tolist(), column
    assert arrow["cap_ms"].isna().sum() == 1  # gpt carries no cap
    runs = simulation_runs(con)
    policy = SimulationPolicy.parse(["fetch=2500ms", "search=3s"], "9s")
    through_arrow, through_pandas = (replay(prepare(runs, f), policy) for f in (arrow, plain))
    pd.testing.assert_frame_equal(through_arrow.runs, through_pandas.runs)
    pd.testing.assert_frame_equal(through_arrow.tools, through_pandas.tools)


def test_a_row_budget_still_bounds_the_arrow_read(hand):
    con, _ = hand
    with rows_at_most(2), pytest.raises(TooManyRows):
        arrow_frame(con, "simulation_steps", Filters().parameters())


def test_equal_policies_have_equal_keys():
    key = SimulationPolicy({"tool:a": 100, "tool:b": None}, 5_000).key()
    assert SimulationPolicy({"tool:b": None, "tool:a": 100}, 5_000).key() == key
    hash(key)  # a cache key
    for other in (SimulationPolicy({"tool:a": 101, "tool:b": None}, 5_000),
                  SimulationPolicy({"tool:a": 100}, 5_000),
                  SimulationPolicy({"tool:a": 100, "tool:b": None}, 5_000, 10),
                  SimulationPolicy({"tool:a": 100, "tool:b": None}, 5_000, retries=False),
                  SimulationPolicy({"tool:a": 100, "tool:b": None}, 5_000, max_attempts=2),
                  SimulationPolicy({"tool:a": 100, "tool:b": None}, 5_000, backoff_base_ms=1)):
        assert other.key() != key


def test_row_order_does_not_matter(hand):
    # Another backend may return the steps in any order: the replay sorts them itself.
    con, _ = hand
    runs, steps = simulation_runs(con), simulation_steps(con)
    policy = SimulationPolicy.parse(["fetch=2500ms", "search=3s"], "9s")
    ordered = replay(prepare(runs, steps), policy)
    for seed in (1, 2, 3):
        shuffled = replay(prepare(runs, steps.sample(frac=1.0, random_state=seed)), policy)
        pd.testing.assert_frame_equal(shuffled.summary, ordered.summary)
        pd.testing.assert_frame_equal(shuffled.tools, ordered.tools)
        pd.testing.assert_frame_equal(shuffled.runs, ordered.runs)


def test_policy_parsing_errors():
    assert parse_duration_ms("9s", "x") == 9000
    assert parse_duration_ms("1.5m", "x") == 90_000
    assert parse_duration_ms("250ms", "x") == 250
    assert SimulationPolicy.parse(["fetch_report=none"]).caps_ms == {"fetch_report": None}
    for bad, message in ((["fetch"], "NAME=DURATION"), (["fetch=9"], "with a unit"),
                         (["fetch=9s", "fetch=3s"], "given twice"), (["fetch=0s"], "positive")):
        with pytest.raises(PolicyError, match=message):
            SimulationPolicy.parse(bad)
    with pytest.raises(PolicyError, match="--deadline"):
        SimulationPolicy.parse(deadline="soon")


def test_censored_fit_recovers_the_distribution():
    rng = np.random.default_rng(3)
    latency = np.exp(math.log(400) + 1.35 * rng.standard_normal(20_000))
    cap = 3_000.0
    done, cut = latency[latency <= cap], np.full(int((latency > cap).sum()), cap)
    fit = fit_lognormal(done, cut)
    assert fit is not None
    assert fit.median_ms == pytest.approx(400, rel=0.05)
    assert fit.sigma == pytest.approx(1.35, rel=0.03)
    # Fitting the completed calls alone understates the tail a looser cap would meet.
    naive = fit_lognormal(done, np.array([]))
    assert naive is not None and naive.sigma < 1.25
    assert float(fit.survival(np.array([9_000.0]))[0]) == pytest.approx(
        float((latency > 9_000).mean()), abs=0.004)
    # Draws above a cut are above it and follow the conditional tail.
    drawn = fit.draw_above(np.full(20_000, cap), 1.0 - rng.random(20_000))
    assert drawn.min() > cap
    assert float(np.median(drawn)) == pytest.approx(float(np.median(latency[latency > cap])),
                                                    rel=0.1)
    assert fit_lognormal(np.array([5.0, 6.0]), np.array([])) is None  # too few to fit


def test_normal_functions_match_the_standard_library():
    normal = statistics.NormalDist()
    p = np.array([1e-12, 1e-6, 0.01, 0.02425, 0.3, 0.5, 0.9, 0.99, 1 - 1e-9])
    expected = np.array([normal.inv_cdf(float(v)) for v in p])
    assert np.allclose(inverse_cdf(p), expected, atol=1e-8, rtol=1e-8)
    z = np.linspace(-6, 6, 25)
    assert np.allclose(normal_sf(z), [1 - normal.cdf(float(v)) for v in z], atol=1e-7)
    assert LognormalFit(0.0, 1.0, 3, 0, 1).median_ms == 1.0


# ---- budgetscope simulate ------------------------------------------------------------------

def invoke(db: str, *args: str):  # noqa: ANN201
    return CliRunner().invoke(cli, ["--db", db, "simulate", *args])


def test_cli_simulate_csv_json_table(hand_db: str, tmp_path: Path) -> None:
    policy = ["--cap", "fetch=2500ms", "--no-retries"]
    result = invoke(hand_db, *policy)
    assert result.exit_code == 0, result.output
    con = open_db(Path(hand_db).parent)
    try:
        expected = simulate(con, SimulationPolicy.parse(["fetch=2500ms"], retries=False))
    finally:
        con.close()
    assert result.output.encode() == to_csv_bytes(expected.summary)
    lines = result.output.splitlines()
    assert lines[0] == "metric,actual,predicted,fit_share"
    assert "client_timeouts,1,2,0.000000" in lines
    tools_json = json.loads(invoke(hand_db, *policy, "--view", "tools", "--format",
                                   "json").output)
    fetch = next(row for row in tools_json if row["step_key"] == "tool:fetch")
    assert (fetch["calls"], fetch["timeouts"], fetch["cap_ms"]) == (3, 1, 2500.0)
    assert fetch["run_timeout_rate_formula"] == pytest.approx(1 - (2 / 3) ** 1.5, abs=1e-6)
    table = invoke(hand_db, *policy, "--format", "table")
    assert table.exit_code == 0, table.output
    assert "policy: caps: fetch=2.5 s; deadline: as recorded" in table.output
    assert "run_timeout_rate_formula" in table.output and "exhaustion_rate" in table.output
    out = tmp_path / "sim.csv"
    assert invoke(hand_db, *policy, "--out", str(out)).exit_code == 0
    assert out.read_bytes() == result.output.encode()
    # Filters as for report: no run started after T0 + 1 h.
    empty = invoke(hand_db, "--since", "2026-11-23T11:00:00Z")
    assert empty.exit_code == 1 and "no runs match" in empty.output


@pytest.mark.parametrize(("args", "message"), [
    (["--cap", "fech=2s"], "no step named fech"),
    (["--cap", "fetch=2"], "with a unit"),
    (["--deadline", "-3s"], "not a duration"),
    (["--min-start", "soon"], "--min-start"),
    (["--since", "yesterday"], "not an ISO date"),
])
def test_cli_simulate_bad_input(hand_db: str, args: list[str], message: str) -> None:
    result = invoke(hand_db, *args)
    assert result.exit_code == 2  # a usage error, as every command's (it exited 1)
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_simulate_without_a_database(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "none.duckdb"))
    assert result.exit_code == 1 and "no database at" in result.output


def test_an_endless_step_stays_inside_its_own_run(tmp_path):
    # A client timeout with no cap, no allocation and no other call of its key to fit: its
    # latency is unknown above the deadline (infinite). Runs replayed after it must not
    # inherit that through the replay's cumulative time (they came out NaN before).
    con = open_db(tmp_path)
    try:
        b = TraceBuilder(seed=21)
        endless = b.run(0, 12_000, 10_000, gen_ai_agent_name="alpha")
        b.step(endless, "tool", "lonely", 0, 12_000, **{"budget.outcome": "client_timeout"})
        later = b.run(60_000, 62_300, 10_000, gen_ai_agent_name="alpha")
        _tool(b, later, "tool", "fetch", 60_100, 61_100, 9_900, 5_000)
        _tool(b, later, "tool", "fetch", 61_200, 62_200, 8_800, 5_000)
        store(con, b.finished())
        with np.errstate(invalid="raise"):
            result = simulate(con, SimulationPolicy())
    finally:
        con.close()
    assert utilisation(result, b.trace_id(later)) == pytest.approx(0.23)
    assert utilisation(result, b.trace_id(endless)) == pytest.approx(1.2)
