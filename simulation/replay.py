"""Timeout-policy replay: what a different cap, deadline, refusal threshold or retry setting
would have done to the runs already stored. Pure numpy on the two DataFrames that
simulation/data.py reads (simulation_runs, simulation_steps): it never touches a
connection, so any backend that returns those frames can be simulated.

How a run is re-timed
- A run is its top-level steps in start order, grouped into stages: a step that starts before
  every earlier step of the run has ended joins their stage (parallel fan-out calls, a hedged
  duplicate); otherwise it opens a new stage. The harness time before a stage (its gap) and
  each step's offset inside its stage are kept as recorded; a stage lasts as long as its
  longest member. Under a policy the stages run back to back again: stage k starts when stage
  k-1 ends plus its gap. The record replays to itself when nothing changes.
- A call's latency is known exactly when it finished (ok, upstream or client error). A call cut
  at c (client_timeout at its allocation, or cancelled) only says latency > c: under a cap at
  or below c it times out again, exactly; above c its latency is drawn from the step's
  log-normal fitted with censoring (simulation/fit.py), conditional on > c. A call the
  record refused that the policy starts gets an unconditional draw. Draws are seeded and made
  once per data set, not per policy: moving a slider never reshuffles the world.
- A call times out at its cap when latency > cap (duration cap + its recorded cleanup). With
  retries on, a call that newly times out at its cap is retried up to the policy's attempts,
  after backoffs of base·2^(k-1), each retry's latency drawn from the fit (such calls rest on
  the fit). With retries off, recorded retry attempts and backoff sleeps are dropped.
- Parallel calls: a step starting within 2 ms of its stage's first step joins the stage even
  if the step before it has ended (fan-out calls are dispatched a fraction of a ms apart and a
  refused one ends within microseconds). A cancelled call (a hedge answered first, a user
  cancelled) is cancelled at the same point again unless the cap now fires first.
- A timeout without a recorded cap (plain OpenTelemetry instrumentation) is taken to have hit a
  cap at the point it was cut.
- The deadline: the first stage where a call is refused (budget left beyond the reserve below
  min-start, in runs whose steps report budget.remaining_ms; or no budget left at all), where a
  call is still waiting when the deadline fires, or where a sleep crosses it, is the run's
  last: later stages never start, and the run is exhausted. A run is also exhausted when its
  replayed end (last step end plus its recorded teardown) reaches the deadline. After a
  refusal the agent lands a partial answer: the steps the record shows after its first
  refusal are kept after the replay's own refusal, and dropped when the run no longer refuses.
- A timeout well before its allocation ran out (a retrying client's attempt caps inside the
  step) ends at the same point again unless the cap now fires first.
- A run whose replay is its record (same steps, times and fates, same budget) keeps its
  recorded outcome: the record knows things the replay cannot, such as the agent's verdict.

What the replay cannot know
- What a run would have done after its record ends: a run the record cut short (exhausted,
  refused, failed) that the policy lets through its recorded steps is counted as not
  exhausted, its utilisation from those steps (`runs_beyond_record` counts them).
- Agent reactions that are not timing: a model timeout failing the run, a newly uncertain write
  being read back (those reads are counted as `write_timeouts`, future reconciliations, but
  their time is not added), hedges starting or not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulation.policy import PolicyError, SimulationPolicy
from simulation.prepare import (
    EXTRA_ATTEMPTS,
    MS,
    Prepared,
    SimulationInputError,
    draw_latency,
    exhausted_as_recorded,
    per_run_max,
    prepare,
    recorded_caps,
    segment_max,
    typical_budget_ms,
)
from simulation.result import SimulationResult, assemble_result

__all__ = ["Prepared", "SimulationInputError", "SimulationResult", "check_caps", "prepare",
           "recorded_caps", "replay", "simulate_frames", "typical_budget_ms", "unmatched_caps"]


def unmatched_caps(prep: Prepared, policy: SimulationPolicy) -> list[str]:
    """Cap names that match no step of the selected runs (a typo, or another agent's tool)."""
    known = {str(k) for k in prep.keys} | {str(n) for n in prep.key_names}
    return sorted(set(policy.caps_ms) - known)


def check_caps(prep: Prepared, policy: SimulationPolicy) -> None:
    unknown = unmatched_caps(prep, policy)
    if unknown:
        raise PolicyError(f"--cap: no step named {', '.join(unknown)} in the selected runs "
                          "(give a step name such as fetch_report, or a key such as "
                          "tool:fetch_report)")


def _caps(prep: Prepared, policy: SimulationPolicy) -> np.ndarray:
    override = np.full(len(prep.keys), np.nan)
    for code, (key, name) in enumerate(zip(prep.keys, prep.key_names, strict=True)):
        for candidate in (key, name):  # a full key wins over a bare name
            if candidate in policy.caps_ms:
                cap = policy.caps_ms[candidate]
                override[code] = np.inf if cap is None else float(cap)
                break
    per_step = override[prep.key]
    return np.where(np.isnan(per_step), prep.recorded_cap_ms, per_step)


def _stage_starts(prep: Prepared, active: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Each step's replayed start (ns from its run's start): stages back to back, each after
    its recorded gap, as long as its longest active member; an inactive stage takes no time."""
    if not len(prep.run):
        return np.zeros(0)
    member_end = np.where(active, prep.offset_ns + dur_ns, 0.0)
    span = segment_max(member_end, prep.stage_first_step)
    stage_active = np.logical_or.reduceat(active, prep.stage_first_step)
    gap = np.where(stage_active, prep.stage_gap_ns, 0.0)
    increment = gap + span
    # One cumulative sum over all runs' stages, each run's share taken off by its base. A
    # stage without end (a timed-out call with no cap and no fit: infinite) must not reach the
    # next runs through that sum: the sum takes only finite increments, and a run's stages
    # after an endless one start at infinity, counted apart.
    endless = ~np.isfinite(increment)
    finite = np.where(endless, 0.0, increment)
    before = np.cumsum(finite) - finite  # finite time of all earlier stages, all runs
    endless_before = np.cumsum(endless) - endless
    first = prep.run_first_stage[prep.stage_run]
    stage_start = before - before[first] + gap
    stage_start = np.where(endless_before > endless_before[first], np.inf, stage_start)
    return stage_start[prep.stage] + prep.offset_ns


def replay(prep: Prepared, policy: SimulationPolicy) -> SimulationResult:
    """The stored runs re-timed under `policy`, beside what actually happened."""
    n = len(prep.run)
    cap = _caps(prep, policy)
    active = np.ones(n, dtype=bool)
    if not policy.retries:
        active &= (prep.attempt <= 1) & ~prep.is_backoff

    starts_anyway = policy.min_start_ms is not None  # else recorded refusals stay refusals
    latency = prep.latency_ms
    started_call = prep.is_call & (~prep.recorded_refused | starts_anyway)
    capped = started_call & (latency > cap)
    wait_ms = np.where(started_call, np.minimum(latency, cap), prep.recorded_ns / MS)
    # A cancelled call was stopped by something other than a limit (a hedge answered first, a
    # user cancelled): it is cancelled at the same point again unless the cap now fires first.
    capped = np.where(prep.cancelled, cap < prep.cut_ms, capped)
    capped |= prep.given_up_early & started_call
    fixed_end = prep.cancelled | prep.given_up_early
    wait_ms = np.where(fixed_end, np.minimum(prep.cut_ms, cap), wait_ms)
    cleanup = np.where(capped, prep.cleanup_ns, 0.0)

    # New retries: a call that now times out at its cap, and did not in the record.
    extra_calls = np.zeros(n, dtype=np.int64)
    extra_timeouts = np.zeros(n, dtype=np.int64)
    if policy.retries:
        idx = np.flatnonzero(capped & prep.retried_kind & ~prep.recorded_timeout
                             & (prep.attempt < policy.max_attempts))
        still = np.ones(len(idx), dtype=bool)
        extra_ms = np.zeros(len(idx))
        for k in range(min(policy.max_attempts - 1, EXTRA_ATTEMPTS)):
            attempt_no = prep.attempt[idx] + k  # the attempt that just timed out
            go = still & (attempt_no < policy.max_attempts)
            if not np.any(go):
                break
            drawn = draw_latency(prep.key_mu, prep.key_sigma, prep.key[idx], np.zeros(len(idx)),
                          prep.retry_u[idx, k])
            c = cap[idx]
            extra_ms += np.where(go, policy.backoff_base_ms * 2.0 ** (attempt_no - 1)
                                 + np.minimum(drawn, c), 0.0)
            extra_calls[idx] += go
            still = go & (drawn > c)
            extra_timeouts[idx] += still
        wait_ms[idx] += extra_ms
    dur_ns = wait_ms * MS + cleanup

    runs = prep.runs
    budget = runs["budget_ms"].to_numpy(dtype=float, na_value=np.nan)
    budgeted = ~np.isnan(budget)
    deadline = runs["deadline_offset_ns"].to_numpy(dtype=float, na_value=np.nan)
    new_budget = budget.copy()
    if policy.deadline_ms is not None:
        deadline = deadline + (policy.deadline_ms - budget) * MS
        new_budget = np.where(budgeted, float(policy.deadline_ms), np.nan)
    deadline = np.where(budgeted, deadline, np.inf)
    reserve = runs["reserve_ms"].to_numpy(dtype=float, na_value=0.0)
    step_deadline = deadline[prep.run]
    call = prep.is_call
    # A budget-aware call is allocated what is left beyond the run's reserve (budgetscope_sdk's
    # min(cap, remaining - reserve)); only the landing may wait into the reserve.
    kept_ms = np.where(prep.budget_aware[prep.run] & ~prep.landing, reserve[prep.run], 0.0)

    def fates(start: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, ...]:
        remaining_ns = step_deadline - start
        refused = live & call & (remaining_ns < MS)
        if starts_anyway:
            left_ms = np.floor(remaining_ns / MS) - reserve[prep.run]
            refused |= (live & call & prep.budget_aware[prep.run] & ~prep.landing
                        & (left_ms < policy.min_start_ms))
        else:
            refused |= live & call & prep.recorded_refused
        # A call is allocated whole milliseconds (budget.allocated_ms): the deadline's wait
        # fires at start + floor(remaining), not at the deadline's own nanosecond.
        waiting = live & call & ~refused & (wait_ms > np.floor(remaining_ns / MS) - kept_ms)
        sleeping = live & ~call & (start + dur_ns > step_deadline)
        return remaining_ns, refused, waiting, sleeping

    # Pass 1: where each run stops (its first refusal or deadline), landing steps aside.
    start = _stage_starts(prep, active & ~prep.landing, dur_ns)
    _, refused, waiting, sleeping = fates(start, active & ~prep.landing)
    event = refused | waiting | sleeping
    big = np.iinfo(np.int64).max
    last_stage = np.full(prep.n_runs, big, dtype=np.int64)
    np.minimum.at(last_stage, prep.run[event], prep.stage[event])
    stops_refused = np.zeros(prep.n_runs, dtype=bool)
    stop_step = event & (prep.stage == last_stage[prep.run])
    stops_refused[prep.run[stop_step & refused]] = True
    stops_refused &= ~np.isin(np.arange(prep.n_runs), prep.run[stop_step & ~refused])
    # Pass 2: later stages never start; a run stopped by a refusal lands its partial answer.
    happened = active & np.where(prep.landing, stops_refused[prep.run],
                                 prep.stage <= last_stage[prep.run])
    start = _stage_starts(prep, happened, dur_ns)
    remaining_ns, refused, waiting, sleeping = fates(start, happened)
    end = np.where(waiting, start + (np.floor(remaining_ns / MS) - kept_ms) * MS + prep.cleanup_ns,
                   start + dur_ns)
    end = np.where(refused, start + np.minimum(prep.recorded_ns, 100_000.0), end)

    started = happened & call & ~refused
    deadline_cut = started & waiting
    # Attempts that timed out: the first (at its cap or at the deadline) and any new retries.
    timed_out_calls = np.where(started, (capped | deadline_cut) + extra_timeouts, 0)
    calls = np.where(started, 1 + extra_calls, 0)
    uses_fit = started & (
        (prep.recorded_timeout & ~prep.given_up_early
         & (np.minimum(cap, np.floor(np.maximum(remaining_ns, 0) / MS) - kept_ms) > prep.cut_ms))
        | prep.recorded_refused | (extra_calls > 0))

    run_end = per_run_max(prep.run, np.where(happened, end, 0.0), prep.n_runs)
    run_end += prep.run_tail_ns
    had_event = last_stage < big
    exhausted = budgeted & (had_event | (run_end >= deadline))
    with np.errstate(divide="ignore", invalid="ignore"):
        utilisation = np.where(new_budget > 0, run_end / MS / new_budget, np.nan)
    # A run whose replay is its record (every step at the same time with the same fate, the
    # same budget) keeps its recorded outcome: the record knows things the replay cannot
    # (the agent's own verdict, a landing that failed rather than ran out of time).
    differs = (~happened | (np.abs(start - prep.start_ns) > 1_000)
               | (np.abs(end - prep.end_ns) > 1_000) | (refused != prep.recorded_refused)
               | ((timed_out_calls > 0) != prep.recorded_timeout))
    unchanged = np.ones(prep.n_runs, dtype=bool)
    unchanged[prep.run[differs]] = False
    if policy.deadline_ms is not None:
        unchanged &= budget == policy.deadline_ms
    recorded_exhausted = exhausted_as_recorded(runs)
    exhausted = np.where(unchanged & budgeted, recorded_exhausted, exhausted)
    utilisation = np.where(unchanged, runs["utilisation"].to_numpy(dtype=float,
                                                                   na_value=np.nan),
                           utilisation)
    run_uses_fit = np.zeros(prep.n_runs, dtype=bool)
    run_uses_fit[prep.run[uses_fit]] = True

    return assemble_result(prep, policy, cap, calls, timed_out_calls, refused & happened,
                           started, uses_fit, exhausted, utilisation, run_uses_fit, budgeted)


def simulate_frames(runs: pd.DataFrame, steps: pd.DataFrame,
                    policy: SimulationPolicy) -> SimulationResult:
    return replay(prepare(runs, steps), policy)


