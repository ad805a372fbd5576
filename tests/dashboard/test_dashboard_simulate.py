"""The What-if page (dashboard/app_pages/simulate.py) under Streamlit's AppTest on the
bundled sample traces: the numbers it shows equal simulation.data.simulate for the same
filters and policy, before and after moving sliders."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import fmt
from simulation.data import simulate
from simulation.policy import SimulationPolicy
from simulation.replay import SimulationResult
from store import connect
from tests.support import ui
from tests.support.apptest import FILTERS, PARAMS, chart, check, open_simulate
from tests.support.trace_builder import TraceBuilder, store


def expected(db: str, policy: SimulationPolicy) -> SimulationResult:
    con = connect(db, read_only=True)
    try:
        return simulate(con, policy, FILTERS)
    finally:
        con.close()


def shown(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _array(value: object) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def assert_page_equals(at: AppTest, result: SimulationResult) -> None:
    rows = result.summary.set_index("metric")["predicted"]
    metrics = shown(at)
    assert metrics["Exhaustion rate"] == fmt.percent(rows["exhaustion_rate"])
    assert metrics["Client timeout rate"] == fmt.percent(rows["client_timeout_rate"])
    assert metrics["Utilisation p99"] == fmt.percent(rows["utilisation_p99"])
    assert metrics["Refused calls"] == fmt.count(rows["refused"])
    assert metrics["Writes timing out"] == fmt.count(rows["write_timeouts"])
    frames = [frame.value for frame in at.dataframe]
    summary = next(f for f in frames if "metric" in f.columns)
    tools = next(f for f in frames if "run_timeout_rate_formula" in f.columns)
    assert list(summary["predicted"]) == list(result.summary["predicted"])
    assert list(tools["timeouts"]) == list(result.tools["timeouts"])
    np.testing.assert_allclose(tools["run_timeout_rate_formula"],
                               result.tools["run_timeout_rate_formula"])
    spec = chart(at, "Client timeout rate per step: actual vs predicted")
    predicted = next(t for t in spec["data"] if t["name"] == "predicted")
    with_calls = result.tools[(result.tools["calls_actual"] > 0) | (result.tools["calls"] > 0)]
    np.testing.assert_allclose(_array(predicted["x"]), with_calls["timeout_rate"])
    # The utilisation curve's points are exact: the share of runs at or below each.
    spec = chart(at, "Run utilisation: actual vs predicted")
    predicted = next(t for t in spec["data"] if t["name"] == "predicted")
    utilisation = np.sort(result.runs["utilisation"].dropna().to_numpy(dtype=float))
    at_or_below = np.searchsorted(utilisation, _array(predicted["x"]), side="right")
    np.testing.assert_allclose(_array(predicted["y"]), at_or_below / len(utilisation))


@pytest.mark.slow
def test_page_shows_the_simulation_and_follows_its_sliders(db: str) -> None:
    at = open_simulate()
    # Sliders untouched: every run keeps its own caps and budget, the record replays to itself.
    untouched = expected(db, SimulationPolicy())
    assert_page_equals(at, untouched)
    rows = untouched.summary.set_index("metric")
    assert list(rows["predicted"]) == list(rows["actual"])
    assert any("Exact" in caption.value for caption in at.caption)
    before = shown(at)
    recorded_cap_s = at.slider(key="sim_cap:tool:fetch_report").value

    # The deadline slider is there once a deadline is set (off: "as recorded", no slider).
    assert not [w for w in at.slider if w.key == "sim_deadline_s"]
    at.toggle(key="sim_deadline_on").set_value(True).run()
    at.slider(key="sim_cap:tool:fetch_report").set_value(3.0)
    at.slider(key="sim_deadline_s").set_value(30.0)
    at.toggle(key="sim_retries").set_value(False)
    at.run()
    check(at)
    policy = SimulationPolicy.parse(["tool:fetch_report=3000ms"], "30000ms", retries=False)
    assert_page_equals(at, expected(db, policy))
    assert shown(at)["Exhaustion rate"] != before["Exhaustion rate"]
    # durations as every view writes them (escaped: the caption is Markdown)
    assert any(caption.value.startswith("Policy") and "3\\.0 s" in caption.value
               and "deadline\\: 30\\.0 s" in caption.value for caption in at.caption)

    # Back where they started: the untouched replay again (kept per policy, never another's).
    at.slider(key="sim_cap:tool:fetch_report").set_value(recorded_cap_s)
    at.toggle(key="sim_deadline_on").set_value(False)
    at.toggle(key="sim_retries").set_value(True)
    at.run()
    check(at)
    assert_page_equals(at, untouched)
    assert shown(at) == before


@pytest.mark.slow
def test_hostile_step_names_stay_text(tmp_path_factory: pytest.TempPathFactory,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path_factory.mktemp("simulate_hostile")
    con = connect(folder / "hostile.duckdb")
    try:
        b = TraceBuilder(seed=5)
        run = b.run(0, 9_000, 10_000, gen_ai_agent_name=ui.HOSTILE_AGENT)
        for index, (name, end) in enumerate(((ui.HOSTILE_LINK, 3_000),
                                             (ui.HOSTILE_IMG, 6_000), ("a=b", 8_000))):
            b.step(run, "tool", name, end - 2_500, end, **{
                "budget.cap_ms": 4_000 + index, "budget.allocated_ms": 4_000 + index,
                "budget.remaining_ms": 10_000 - end + 2_500, "budget.outcome": "ok"})
        store(con, b.finished())
    finally:
        con.close()
    monkeypatch.setenv("BUDGETSCOPE_DB", str(folder / "hostile.duckdb"))
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["range"] = "all"
    at.switch_page("app_pages/simulate.py")
    at.run()
    check(at)
    labels = {s.key: s.label for s in at.slider}
    link = labels[f"sim_cap:tool:{ui.HOSTILE_LINK}"]
    assert link == fmt.escape_md(f"tool:{ui.HOSTILE_LINK}") and link != \
        f"tool:{ui.HOSTILE_LINK}"
    # Moving the slider of a name with '=' in it simulates that step, not a parse error.
    # Its 2500 ms call now times out at 1 s; without retries that is 1 call in 3 (with them,
    # a step with one completed call has no fit, so both retries would time out too: 3 in 5).
    at.slider(key="sim_cap:tool:a=b").set_value(1.0)
    at.toggle(key="sim_retries").set_value(False)
    at.run()
    check(at)
    assert shown(at)["Client timeout rate"] == fmt.percent(1 / 3)
    at.toggle(key="sim_retries").set_value(True)
    at.run()
    check(at)
    assert shown(at)["Client timeout rate"] == fmt.percent(3 / 5)


def test_a_link_opens_what_if_with_a_cap_set(db: str) -> None:
    """The run view's next step links here with `cap=STEP_KEY=MS`: the slider starts there, and
    the page's figures are that policy's."""
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in {**PARAMS, "cap": "tool:fetch_report=4500"}.items():
        at.query_params[key] = value
    at.switch_page("app_pages/simulate.py")
    at.run()
    check(at)
    assert at.slider(key="sim_cap:tool:fetch_report").value == 4.5
    assert_page_equals(at, expected(db, SimulationPolicy.parse(["tool:fetch_report=4500ms"])))
    # the summary names its figures for people; the CSV's metric names stay in the frame
    summary = next(t for t in at.dataframe if "figure" in t.value.columns)
    assert "exhaustion rate, upper bound (runs beyond the record exhausted)" in set(
        summary.value["figure"])


def test_the_whole_policy_is_in_the_address_and_restored_from_it(db: str) -> None:
    """`/simulate?cap=model:gpt-4o-mini=10000` was silently ignored and every slider's change
    dropped out of the address: now the address says the whole policy (caps of any kind, a key
    recorded without a cap, the deadline, the minimum start, retries), a link opens exactly
    that policy, and moving a slider rewrites the address."""
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in PARAMS.items():
        at.query_params[key] = value
    at.query_params["cap"] = ["model:gpt-4o-mini=10000", "queue:handoff_queue=8000"]
    at.query_params["deadline"] = "45000"
    at.query_params["minstart"] = "1500"
    at.query_params["retries"] = "off"
    at.switch_page("app_pages/simulate.py")
    at.run()
    check(at)
    policy = SimulationPolicy({"model:gpt-4o-mini": 10_000, "queue:handoff_queue": 8_000},
                              45_000, 1_500, retries=False)
    assert at.slider(key="sim_cap:model:gpt-4o-mini").value == 10.0
    assert at.slider(key="sim_cap:queue:handoff_queue").value == 8.0
    assert at.multiselect(key="sim_add:queue").value == ["queue:handoff_queue"]
    assert any(c.value == fmt.escape_md(f"Policy: {policy.describe()}") for c in at.caption)
    assert_page_equals(at, expected(db, policy))
    written = {key: at.query_params[key] for key in ("cap", "deadline", "minstart", "retries")}
    assert written == {"cap": ["model:gpt-4o-mini=10000", "queue:handoff_queue=8000"],
                       "deadline": "45000", "minstart": "1500", "retries": "off"}
    # a slider moved: the address follows, and the copyable link says the same
    at.slider(key="sim_cap:tool:fetch_report").set_value(3.0).run()
    check(at)
    caps = at.query_params["cap"]
    caps = caps if isinstance(caps, list) else [caps]
    assert sorted(caps) == ["model:gpt-4o-mini=10000", "queue:handoff_queue=8000",
                            "tool:fetch_report=3000"]
    link = next(c.value for c in at.code if "/simulate?" in c.value)
    assert "cap=tool:fetch_report=3000" in link and "retries=off" in link
    assert "minstart=1500" in link and "since=2026-11-16" in link


def test_a_cap_for_a_step_the_runs_do_not_have_is_said_and_left_out(db: str) -> None:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in {**PARAMS, "cap": "tool:no_such_tool=4500"}.items():
        at.query_params[key] = value
    at.switch_page("app_pages/simulate.py")
    at.run()
    assert not at.exception
    assert any("tool:no_such_tool" in w.value.replace("\\", "") for w in at.warning)
    assert "cap" not in dict(at.query_params)
