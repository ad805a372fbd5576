"""The run's story in words (queries/run_story.py): what the run view and `budgetscope run`
say about the deadline, the holder and exhaustion (a run cancelled at 38 s of a 60 s budget
said "running at the deadline" and "when the deadline fired"), culprit and holder as numbered
steps (a culprit and a holder of one step key read "Culprit: model:gpt-4o-mini … Holder:
model:gpt-4o-mini ⚠ The culprit is not the holder"), and the one next step it suggests."""

from __future__ import annotations

import pandas as pd

from queries.run_story import (
    COMPARE,
    DECLARE_BUDGET,
    DECLARE_CAP,
    NOT_THE_HOLDER,
    NOTHING,
    READ_BACK,
    SMALLER_CAP,
    failures_line,
    next_step,
    spent_and_held,
    step_name,
    tell,
)

S = 1_000_000_000  # ns per second


def run(latest_s: float, budget_s: float = 60, outcome: str | None = None,
        refused: int = 0) -> dict[str, object]:
    return {"start_ns": 0, "budget_ms": budget_s * 1000, "deadline_ns": int(budget_s * S),
            "latest_end_ns": int(latest_s * S), "outcome": outcome, "refused_steps": refused}


def test_a_cancelled_run_never_met_its_deadline() -> None:
    story = tell(run(38, outcome="cancelled"))
    assert story.ending == ("Cancelled at +38.0 s, 22.0 s before its deadline at +60.0 s: "
                            "the deadline never fired.")
    assert "deadline never fired" in story.holder_role
    assert "running" not in story.holder_role
    assert story.exhausted_reason.startswith("Not exhausted: the agent stated the outcome "
                                             "'cancelled'")


def test_a_deadline_that_fired() -> None:
    story = tell(run(70))
    assert story.ending == ("The deadline fired at +60.0 s; the run's last span ended at "
                            "+1 min 10 s, 10.0 s past it.")
    assert story.holder_role == "running when the deadline fired"
    assert story.exhausted_reason == "Exhausted: it ran to its deadline."


def test_a_failed_run_past_its_deadline_says_why_it_is_not_exhausted() -> None:
    story = tell(run(70, outcome="failed"))
    assert story.ending.startswith("The deadline fired at +60.0 s")
    assert story.exhausted_reason == (
        "Not exhausted although it ran to its deadline: the agent stated the outcome 'failed', "
        "and a stated outcome decides (docs/metrics.md §4).")


def test_ended_early_failed_early_and_refused() -> None:
    assert tell(run(20)).ending.startswith("Ended at +20.0 s, 40.0 s before its deadline")
    assert tell(run(20)).exhausted_reason == (
        "Not exhausted: it ended before its deadline and no step was refused.")
    assert tell(run(20, outcome="failed")).ending.startswith("Failed at +20.0 s")
    assert tell(run(20, refused=2)).exhausted_reason == (
        "Exhausted: 2 steps were refused for lack of budget.")
    # docs/metrics.md §4: a step refused for its dollar budget leaves the time budget alone
    assert tell(run(20, refused=1) | {"exhausted": False}).exhausted_reason == (
        "Not exhausted in time: it ended before its deadline, and its refused step was "
        "refused for lack of tokens or dollars, not time.")
    partial = tell(run(55, outcome="partial"))
    assert partial.exhausted_reason.startswith("Exhausted although it ended before its deadline")


def test_no_budget() -> None:
    story = tell({"start_ns": 0, "budget_ms": None, "deadline_ns": None})
    assert story.ending.startswith("No budget is known for this run")
    assert story.holder_role == "" and story.exhausted_reason == ""


def blamed(culprit: tuple[str, str, int], holder: tuple[str, str, int], exhausted: bool = True,
           at_deadline: bool | None = True, latest_s: float = 70) -> dict[str, object]:
    """A run row whose culprit and holder are (span id, step key, number)."""
    return {**run(latest_s), "exhausted": exhausted, "holder_at_deadline": at_deadline,
            "culprit_span_id": culprit[0], "culprit_key": culprit[1], "culprit_step": culprit[2],
            "holder_span_id": holder[0], "holder_key": holder[1], "holder_step": holder[2],
            "culprit_share": 0.5, "culprit_ms": 30_000}


def test_two_calls_of_one_step_key_are_two_steps() -> None:
    story = tell(blamed(("a", "model:gpt-4o-mini", 3), ("b", "model:gpt-4o-mini", 9)))
    assert (story.culprit, story.holder) == ("#3 model:gpt-4o-mini", "#9 model:gpt-4o-mini")
    assert story.relation == ("The holder #9 model:gpt-4o-mini is another call of the same "
                              "step, not the culprit itself.")
    assert spent_and_held(blamed(("a", "model:gpt-4o-mini", 3), ("b", "model:gpt-4o-mini", 9)),
                          story).endswith(
        "Holder #9 model:gpt-4o-mini (running when the deadline fired): another call of the "
        "same step, not the culprit itself.")
    assert story.culprit_note == NOT_THE_HOLDER
    row = blamed(("a", "model:gpt-4o-mini", 3), ("a", "model:gpt-4o-mini", 3))
    same = tell(row)
    assert same.relation == "The culprit is the holder: the same call."
    assert same.culprit_note == ""
    assert spent_and_held(row, same) == (
        "Culprit #3 model:gpt-4o-mini: 50.0% of the budget (30.0 s). It is also the holder "
        "(running when the deadline fired): the same call.")
    other = tell(blamed(("a", "tool:fetch", 1), ("b", "model:gpt", 2)))
    assert other.relation == "The holder #2 model:gpt is another step than the culprit."


def test_a_healthy_run_has_a_largest_consumer_and_no_warning() -> None:
    story = tell(blamed(("a", "tool:fetch", 1), ("b", "model:gpt", 2), exhausted=False,
                        at_deadline=False, latest_s=30))
    assert story.spender == "largest consumer"
    assert story.culprit_note == ""
    assert story.relation == "The holder #2 model:gpt is another step than the largest consumer."
    assert spent_and_held(blamed(("a", "tool:fetch", 1), ("b", "model:gpt", 2), exhausted=False,
                                 at_deadline=False, latest_s=30), story).startswith(
        "Largest consumer #1 tool:fetch: 50.0% of the budget")


def test_a_holder_not_running_at_the_deadline_is_not_said_to_be() -> None:
    """A tool ended at +4.0 s, the deadline at +5.0 s, the run at +6.0 s: the deadline fired,
    but no step was running then; the holder is the last step started."""
    story = tell(blamed(("a", "tool:t", 1), ("a", "tool:t", 1), at_deadline=False,
                        latest_s=70))
    assert story.ending.startswith("The deadline fired at +60.0 s")
    assert story.holder_role == ("the last step to start before the run ended; no step was "
                                 "running when the deadline fired")
    running = tell(blamed(("a", "tool:t", 1), ("a", "tool:t", 1)))
    assert running.holder_role == "running when the deadline fired"


def test_step_names_carry_their_number() -> None:
    assert step_name(3, "tool:fetch_report") == "#3 tool:fetch_report"
    assert step_name(None, "tool:fetch_report") == "tool:fetch_report"
    assert step_name(None, None) == ""


def steps_frame(*rows: dict[str, object]) -> pd.DataFrame:
    base = {"span_id": "", "number": "1", "step_key": "tool:t", "kind": "tool",
            "step_class": "ok", "is_top_level": True, "cap_ms": None, "allocated_ms": None,
            "utilisation": None, "consumption_ms": 0.0, "duration_ms": 0.0, "start_ns": 0}
    return pd.DataFrame([{**base, **row} for row in rows])


WRITE_COLUMNS = ["span_id", "step_key", "idempotency_key", "is_uncertain", "orphan",
                 "last_result"]


def test_next_step_reads_back_an_orphan_write_first() -> None:
    steps = steps_frame({"span_id": "w", "number": "4", "step_key": "tool:issue_refund",
                         "step_class": "client_timeout"})
    writes = pd.DataFrame([["w", "tool:issue_refund", "refund-7", True, True, None]],
                          columns=WRITE_COLUMNS)
    step = next_step(blamed(("w", "tool:issue_refund", 4), ("w", "tool:issue_refund", 4)),
                     steps, writes)
    assert step.kind == READ_BACK
    assert step.text == ("Read back key refund-7 of #4 tool:issue_refund before retrying: the "
                         "write may have taken effect.")
    assert failures_line(steps) == "1 client give-up (#4)"


def test_next_step_is_what_if_at_a_smaller_cap_for_a_capped_culprit_of_any_kind() -> None:
    """The culprits of most of the demo's exhausted runs are models and queues: the run view
    offered What if only for a tool, and for the others the generic Compare."""
    steps = steps_frame(
        {"span_id": "a", "number": "1", "step_key": "tool:fetch_report", "cap_ms": 9_000,
         "allocated_ms": 9_000, "utilisation": 1.0, "consumption_ms": 9_000.0,
         "duration_ms": 9_000.0, "step_class": "client_timeout"},
        {"span_id": "b", "number": "2", "step_key": "model:gpt-4o-mini", "kind": "model",
         "cap_ms": 30_000, "allocated_ms": 30_000, "utilisation": 0.8,
         "consumption_ms": 24_000.0, "duration_ms": 24_000.0})
    no_writes = pd.DataFrame(columns=WRITE_COLUMNS)
    row = {**blamed(("b", "model:gpt-4o-mini", 2), ("b", "model:gpt-4o-mini", 2)),
           "agent": "support-agent", "start_ns": 1_795_000_000 * S}  # 2026-11-18
    step = next_step(row, steps, no_writes)
    assert (step.kind, step.step_key, step.cap_ms) == (SMALLER_CAP, "model:gpt-4o-mini", 12_000)
    assert step.text == (
        "#2 model:gpt-4o-mini used 80.0% of its 30.0 s allocation and spent 40.0% of the "
        "budget: see in What if how support-agent's runs fare with its cap at 12.0 s "
        "(2026-11-15 to 2026-11-22, the week around this run).")
    assert (step.since, step.until, step.agent) == ("2026-11-15", "2026-11-22", "support-agent")
    assert step.commands == (("simulate", "--cap", "model:gpt-4o-mini=12s", "--agent",
                              "support-agent", "--since", "2026-11-15", "--until",
                              "2026-11-22", "--format", "table"),)
    assert step.what_if


def test_next_step_declares_a_cap_for_an_uncapped_culprit() -> None:
    steps = steps_frame({"span_id": "q", "number": "15", "step_key": "queue:handoff_queue",
                         "kind": "queue", "allocated_ms": 50_000, "consumption_ms": 43_250.0,
                         "duration_ms": 43_250.0})
    row = {**blamed(("q", "queue:handoff_queue", 15), ("q", "queue:handoff_queue", 15)),
           "agent": "support-agent", "start_ns": 1_795_000_000 * S}
    step = next_step(row, steps, pd.DataFrame(columns=WRITE_COLUMNS))
    assert (step.kind, step.step_key, step.cap_ms) == (DECLARE_CAP, "queue:handoff_queue",
                                                       21_600)
    assert step.text.startswith("#15 queue:handoff_queue has no cap and spent 72.1% of the "
                                "budget (43.2 s): declare one")
    assert step.commands[0] == ("budgets", "cap", "queue:handoff_queue", "21.6s")
    assert step.commands[1][:3] == ("simulate", "--cap", "queue:handoff_queue=21.6s")
    assert step.what_if


def test_next_step_declares_a_budget_for_a_run_without_one() -> None:
    row = {**blamed(("a", "tool:t", 1), ("a", "tool:t", 1)), "budget_ms": None,
           "deadline_ns": None, "agent": "triage-agent", "elapsed_ms": 11_200.0}
    step = next_step(row, steps_frame({"span_id": "a"}), pd.DataFrame(columns=WRITE_COLUMNS),
                     typical=True)
    assert step.kind == DECLARE_BUDGET and not step.what_if
    assert step.commands == (("budgets", "set", "triage-agent", "17s"),)
    nobody = next_step({**row, "agent": None}, steps_frame({"span_id": "a"}),
                       pd.DataFrame(columns=WRITE_COLUMNS))
    assert nobody.commands == (("budgets", "set", "--default", "17s"),)


def test_compare_only_when_a_typical_run_exists() -> None:
    steps = steps_frame({"span_id": "b", "number": "2", "step_key": "model:gpt", "kind": "model",
                         "consumption_ms": 20_000.0, "duration_ms": 20_000.0})
    no_writes = pd.DataFrame(columns=WRITE_COLUMNS)
    healthy = blamed(("b", "model:gpt", 2), ("b", "model:gpt", 2), exhausted=False)
    assert next_step(healthy, steps, no_writes, typical=True).kind == COMPARE
    alone = next_step({**healthy, "agent": "solo-agent"}, steps, no_writes, typical=False)
    assert alone.kind == NOTHING and "no completed run of solo-agent" in alone.text
    assert failures_line(steps_frame({})) == "no failed step"


def test_refused_and_cancelled_read_the_same_in_the_plural() -> None:
    steps = steps_frame({"span_id": "a", "number": "1", "step_class": "refused"},
                        {"span_id": "b", "number": "2", "step_class": "refused"},
                        {"span_id": "c", "number": "3", "step_class": "cancelled"},
                        {"span_id": "d", "number": "4", "step_class": "cancelled"})
    assert failures_line(steps) == "2 refused (#1, #2), 2 cancelled (#3, #4)"
