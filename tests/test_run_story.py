"""The run's story in words (queries/run_story.py): what the run view and `budgetscope run`
say about the deadline, the holder and exhaustion (issue 15: a run cancelled at 38 s of a 60 s
budget said "running at the deadline" and "when the deadline fired")."""

from __future__ import annotations

from queries.run_story import tell

S = 1_000_000_000  # ns per second


def run(latest_s: float, budget_s: float = 60, outcome: str | None = None,
        refused: int = 0) -> dict[str, object]:
    return {"start_ns": 0, "budget_ms": budget_s * 1000, "deadline_ns": int(budget_s * S),
            "latest_end_ns": int(latest_s * S), "outcome": outcome, "refused_steps": refused}


def test_a_cancelled_run_never_met_its_deadline() -> None:
    story = tell(run(38, outcome="cancelled"))
    assert story.ending == ("Cancelled at +38.0 s, 22.0 s before its deadline at +1 m 0.0 s: "
                            "the deadline never fired.")
    assert "deadline never fired" in story.holder_role
    assert "running" not in story.holder_role
    assert story.exhausted_reason.startswith("Not exhausted: the agent stated the outcome "
                                             "'cancelled'")


def test_a_deadline_that_fired() -> None:
    story = tell(run(62.5))
    assert story.ending == ("The deadline fired at +1 m 0.0 s; the run's last span ended at "
                            "+1 m 2.5 s, 2.5 s past it.")
    assert story.holder_role == "running when the deadline fired"
    assert story.exhausted_reason == "Exhausted: it ran to its deadline."


def test_a_failed_run_past_its_deadline_says_why_it_is_not_exhausted() -> None:
    story = tell(run(70, outcome="failed"))
    assert story.ending.startswith("The deadline fired at +1 m 0.0 s")
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
    partial = tell(run(55, outcome="partial"))
    assert partial.exhausted_reason.startswith("Exhausted although it ended before its deadline")


def test_no_budget() -> None:
    story = tell({"start_ns": 0, "budget_ms": None, "deadline_ns": None})
    assert story.ending.startswith("No budget is known for this run")
    assert story.holder_role == "" and story.exhausted_reason == ""
