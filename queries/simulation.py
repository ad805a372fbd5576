"""Timeout-policy replay: what a different cap, deadline, refusal threshold or retry setting
would have done to the runs already stored. Pure numpy on the two DataFrames that
queries/simulation_data.py reads (simulation_runs, simulation_steps): it never touches a
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
  log-normal fitted with censoring (queries/simulation_fit.py), conditional on > c. A call the
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

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from queries.simulation_fit import (
    LognormalFit,
    draw_above,
    fit_lognormal,
    run_level_probability,
)
from queries.simulation_policy import PolicyError, SimulationPolicy

CALL_KINDS = frozenset({"tool", "model", "subagent", "queue", "reconcile"})
RETRIED_KINDS = frozenset({"tool", "model", "reconcile"})
EXACT_CLASSES = frozenset({"ok", "upstream_error", "client_error", "error"})
CENSORED_CLASSES = frozenset({"client_timeout", "cancelled"})
MS = 1_000_000  # ns per ms
SEED = 20261130  # the replay's draws; fixed so that the same data always replays the same way
FANOUT_NS = 2 * MS
EXTRA_ATTEMPTS = 4  # retry draws kept per call (policies may allow up to 1 + this attempts)
PERCENTILES = (50, 90, 95, 99)

RUN_COLUMNS = ("run_index", "run_id", "agent", "start_ns", "end_ns", "budget_ms",
               "deadline_offset_ns", "reserve_ms", "utilisation", "exhausted")
STEP_COLUMNS = ("run_index", "step_key", "class", "start_offset_ns", "end_offset_ns",
                "remaining_ms", "cap_ms", "allocated_ms", "is_write", "attempt", "tie")


class SimulationInputError(ValueError):
    """The frames handed to the replay are not what simulation_runs/steps return."""


@dataclass(frozen=True)
class Prepared:
    """Everything about the stored runs that no policy changes, as arrays (steps in run, then
    start order). Built once per data set; `replay` runs on it for each policy."""

    runs: pd.DataFrame
    n_runs: int
    # per step
    run: np.ndarray
    key: np.ndarray  # index into keys
    stage: np.ndarray
    offset_ns: np.ndarray  # start offset inside its stage
    start_ns: np.ndarray  # recorded start, ns from the run start
    end_ns: np.ndarray  # recorded end, ns from the run start
    recorded_ns: np.ndarray  # recorded duration
    is_call: np.ndarray
    retried_kind: np.ndarray
    is_backoff: np.ndarray
    is_write: np.ndarray
    attempt: np.ndarray
    landing: np.ndarray  # after the record's first refusal: the partial answer's steps
    exact: np.ndarray
    censored: np.ndarray
    recorded_timeout: np.ndarray
    cancelled: np.ndarray
    given_up_early: np.ndarray  # client_timeout well before its allocation ran out
    recorded_refused: np.ndarray
    cut_ms: np.ndarray  # censored: the point it was cut at
    latency_ms: np.ndarray  # exact, or drawn (censored above cut; refused unconditional)
    cleanup_ns: np.ndarray  # time after giving up (recorded timeouts; else 0)
    recorded_cap_ms: np.ndarray  # inf: no cap recorded
    retry_u: np.ndarray  # (steps, EXTRA_ATTEMPTS) uniforms for retry draws
    # per stage
    stage_run: np.ndarray
    stage_first_step: np.ndarray
    stage_gap_ns: np.ndarray
    # per run
    run_first_stage: np.ndarray  # -1: no steps
    run_tail_ns: np.ndarray  # recorded run end after its last step ended
    budget_aware: np.ndarray
    # per key
    keys: np.ndarray
    key_names: np.ndarray
    fits: tuple[LognormalFit | None, ...]
    key_mu: np.ndarray
    key_sigma: np.ndarray
    censored_per_key: np.ndarray


@dataclass(frozen=True)
class SimulationResult:
    policy: SimulationPolicy
    summary: pd.DataFrame  # metric, actual, predicted, fit_share
    tools: pd.DataFrame  # one row per step key
    runs: pd.DataFrame  # one row per budgeted run: actual and predicted utilisation/exhaustion
    fits: pd.DataFrame = field(default_factory=pd.DataFrame)


def _check(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SimulationInputError(f"{what} frame lacks columns {missing}")


def _segment_max(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.maximum.reduceat(values, starts) if len(starts) else values[:0]


def _step_order(steps: pd.DataFrame) -> np.ndarray:
    """Indices sorting steps by (run, start, end, tie). One int64 sort on run and start packed
    together, then a lexsort of the few rows that tie on both: a four-key lexsort of 840k
    rows took ~1.4 s, this ~0.1 s."""
    run = steps["run_index"].to_numpy(dtype=np.int64)
    raw_start = steps["start_offset_ns"].to_numpy(dtype=np.int64)
    start = np.clip(raw_start, 0, (1 << 43) - 1)
    if len(run) and (run.max() >= 1 << 20 or np.any(start != raw_start)):
        return np.lexsort((steps["tie"].to_numpy(dtype=np.uint64),
                           steps["end_offset_ns"].to_numpy(dtype=np.int64), raw_start, run))
    primary = (run << 43) | start  # 2^43 ns ≈ 2.4 h into a run; runs below 2^20
    order = np.argsort(primary, kind="stable")
    ranked = primary[order]
    ties = np.flatnonzero(ranked[1:] == ranked[:-1])
    if len(ties):
        tied = np.zeros(len(order), dtype=bool)
        tied[ties] = tied[ties + 1] = True
        at = np.flatnonzero(tied)
        rows = order[at]
        end = steps["end_offset_ns"].to_numpy(dtype=np.int64)[rows]
        tie = steps["tie"].to_numpy(dtype=np.uint64)[rows]
        order[at] = rows[np.lexsort((tie, end, primary[rows]))]
    return order


def _recorded_exhausted(runs: pd.DataFrame) -> np.ndarray:
    """runs.exhausted as booleans; unknown (no budget) counts as not exhausted."""
    return runs["exhausted"].astype(object).where(runs["exhausted"].notna(), False) \
        .astype(bool).to_numpy()


def _per_run_max(run: np.ndarray, values: np.ndarray, n_runs: int) -> np.ndarray:
    """max of `values` per run (0 for a run without any), `run` sorted ascending."""
    out = np.zeros(n_runs)
    if len(run):
        starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
        out[run[starts]] = np.maximum(np.maximum.reduceat(values, starts), 0.0)
    return out


def prepare(runs: pd.DataFrame, steps: pd.DataFrame, seed: int = SEED) -> Prepared:
    """Stages, latencies, censoring and fits from the stored frames."""
    _check(runs, RUN_COLUMNS, "runs")
    _check(steps, STEP_COLUMNS, "steps")
    runs = runs.reset_index(drop=True)
    n_runs = len(runs)
    if n_runs and not np.array_equal(runs["run_index"].to_numpy(), np.arange(n_runs)):
        raise SimulationInputError("runs must be numbered 0..n-1 in order (run_index)")
    # Run, then start, then end, then the span-id hash: the same order whatever order the
    # backend returned the rows in (each step's random draw is tied to its position).
    order = _step_order(steps)
    run = steps["run_index"].to_numpy(dtype=np.int64)[order]
    start = steps["start_offset_ns"].to_numpy(dtype=np.int64)[order]
    end = np.maximum(steps["end_offset_ns"].to_numpy(dtype=np.int64)[order], start)
    n = len(run)
    if n and (run.min() < 0 or run.max() >= n_runs):
        raise SimulationInputError("steps name runs that are not in the runs frame")

    def column(name: str, dtype: type, na_value: object = None) -> np.ndarray:
        values = steps[name].to_numpy(dtype=dtype, na_value=na_value) if na_value is not None \
            else steps[name].to_numpy(dtype=dtype)
        return values[order]

    # Stages: a step opens a new one unless it starts before the latest end so far in its run.
    first_of_run = np.ones(n, dtype=bool)
    first_of_run[1:] = run[1:] != run[:-1]
    latest_end = pd.Series(end).groupby(run).cummax().to_numpy()
    previous_latest = np.empty(n, dtype=np.int64)
    previous_latest[1:] = latest_end[:-1]
    previous_latest[first_of_run] = 0
    # Fan-out calls are dispatched a fraction of a millisecond apart, and a refused one ends
    # within microseconds: a step starting within FANOUT_NS of an open stage's first step is
    # part of it even when the step before it has already ended.
    stage_begin = pd.Series(np.where(first_of_run | (start >= previous_latest), start, -1))
    opens = first_of_run | (start >= previous_latest)
    candidate_begin = stage_begin.where(opens).ffill().to_numpy(dtype=float)
    prior_begin = np.empty(n)
    prior_begin[1:] = candidate_begin[:-1]
    prior_begin[first_of_run] = -np.inf
    opens = first_of_run | ((start >= previous_latest) & (start - prior_begin >= FANOUT_NS))
    stage = np.cumsum(opens) - 1
    stage_first_step = np.flatnonzero(opens)
    stage_run = run[stage_first_step]
    stage_start = start[stage_first_step]
    stage_gap = (stage_start - previous_latest[stage_first_step]).astype(float)
    offset = (start - stage_start[stage]).astype(float)

    run_first_stage = np.full(n_runs, -1, dtype=np.int64)
    stage_opens_run = np.ones(len(stage_run), dtype=bool)
    stage_opens_run[1:] = stage_run[1:] != stage_run[:-1]
    run_first_stage[stage_run[stage_opens_run]] = np.flatnonzero(stage_opens_run)
    run_last_end = _per_run_max(run, end.astype(float), n_runs)
    run_length = (runs["end_ns"].to_numpy(dtype=np.int64)
                  - runs["start_ns"].to_numpy(dtype=np.int64)).astype(float)
    run_tail = np.maximum(run_length - run_last_end, 0.0)

    # Strings are looked at once per distinct value, then everything is integer codes.
    key_codes, keys = pd.factorize(steps["step_key"], sort=True)
    key_codes = key_codes.astype(np.int64)[order]
    keys = np.asarray(keys, dtype=object)
    key_kinds = np.array([str(k).split(":", 1)[0] for k in keys], dtype=object)
    key_names = np.array([str(k).split(":", 1)[-1] for k in keys], dtype=object)
    class_codes, classes = pd.factorize(steps["class"])
    class_codes = class_codes[order]

    def by_key(kinds: frozenset[str]) -> np.ndarray:
        return np.isin(key_kinds, list(kinds))[key_codes] if len(keys) else np.zeros(0, bool)

    def by_class(*names: str) -> np.ndarray:
        return np.isin(np.asarray(classes, dtype=object), names)[class_codes] if n else \
            np.zeros(0, bool)

    is_call = by_key(CALL_KINDS)
    exact = is_call & by_class(*EXACT_CLASSES)
    censored = is_call & by_class(*CENSORED_CLASSES)
    recorded_timeout = is_call & by_class("client_timeout")
    recorded_refused = is_call & by_class("refused")
    duration_ms = (end - start) / MS
    allocated = column("allocated_ms", float, np.nan)
    # Where a timed-out call was cut: its allocation when recorded; else (plain OpenTelemetry
    # instrumentation) the whole ms left to the deadline when it ran that long, and otherwise
    # its duration, the best estimate of a cap we were not told.
    deadline_offset = runs["deadline_offset_ns"].to_numpy(dtype=float, na_value=np.nan)[run]
    left_ms = np.floor((deadline_offset - start) / MS)
    unknown_allocation = recorded_timeout & np.isnan(allocated)
    by_deadline = unknown_allocation & (duration_ms >= left_ms)  # NaN left: False
    cut = np.where(recorded_timeout & ~np.isnan(allocated), np.minimum(allocated, duration_ms),
                   np.where(by_deadline, np.maximum(left_ms, 0.0), duration_ms))
    cleanup_ns = np.where(recorded_timeout, np.maximum(duration_ms - cut, 0.0) * MS, 0.0)
    # A timeout well before its allocation ran out was given up by something inside the step
    # (a retrying client's own attempt caps, a subagent's frame): like a cancellation, it ends
    # at the same point again unless the cap now fires first.
    given_up_early = recorded_timeout & (duration_ms + 1.0 < allocated)  # NaN: False
    cap = column("cap_ms", float, np.nan)
    recorded_cap = np.where(np.isnan(cap), np.where(unknown_allocation & ~by_deadline, cut,
                                                    np.inf), cap)
    remaining = column("remaining_ms", float, np.nan)
    budget_aware = np.zeros(n_runs, dtype=bool)
    budget_aware[run[~np.isnan(remaining)]] = True
    # After a run's first refusal the agent lands a partial answer: the steps the record shows
    # after that refusal's stage are its landing, kept after the replay's own refusal.
    first_refusal_stage = np.full(n_runs, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_refusal_stage, run[recorded_refused], stage[recorded_refused])
    landing = stage > first_refusal_stage[run]

    # One pass per key over its own slice (steps sorted by key once), not a mask per key over
    # all steps: 30 keys × 840k steps of masks cost ~1 s at 50k runs.
    observed = np.flatnonzero(exact | censored)
    by_key_order = observed[np.argsort(key_codes[observed], kind="stable")]
    bounds = np.searchsorted(key_codes[by_key_order], np.arange(len(keys) + 1))
    fits: list[LognormalFit | None] = []
    for code in range(len(keys)):
        mine = by_key_order[bounds[code]:bounds[code + 1]]
        fits.append(fit_lognormal(duration_ms[mine[exact[mine]]], cut[mine[censored[mine]]])
                    if len(mine) else None)
    key_mu = np.array([f.mu if f else np.nan for f in fits])
    key_sigma = np.array([f.sigma if f else np.nan for f in fits])
    censored_per_key = np.bincount(key_codes[censored], minlength=len(keys))

    rng = np.random.default_rng(seed)
    u = 1.0 - rng.random(n)  # (0, 1]
    latency = np.where(exact, duration_ms, np.nan)
    unknown = censored | recorded_refused
    latency[unknown] = _draw(key_mu, key_sigma, key_codes[unknown],
                             np.where(censored, cut, 0.0)[unknown], u[unknown])
    retry_u = 1.0 - rng.random((n, EXTRA_ATTEMPTS))

    return Prepared(
        runs=runs, n_runs=n_runs, run=run, key=key_codes, stage=stage, offset_ns=offset,
        start_ns=start.astype(float), end_ns=end.astype(float),
        recorded_ns=(end - start).astype(float), is_call=is_call,
        retried_kind=by_key(RETRIED_KINDS), is_backoff=by_key(frozenset({"backoff"})),
        is_write=column("is_write", bool), attempt=column("attempt", np.int64),
        landing=landing, exact=exact, censored=censored, recorded_timeout=recorded_timeout,
        cancelled=is_call & by_class("cancelled"), given_up_early=given_up_early,
        recorded_refused=recorded_refused, cut_ms=cut, latency_ms=latency,
        cleanup_ns=cleanup_ns, recorded_cap_ms=recorded_cap, retry_u=retry_u,
        stage_run=stage_run, stage_first_step=stage_first_step, stage_gap_ns=stage_gap,
        run_first_stage=run_first_stage, run_tail_ns=run_tail, budget_aware=budget_aware,
        keys=keys, key_names=key_names, fits=tuple(fits), key_mu=key_mu, key_sigma=key_sigma,
        censored_per_key=censored_per_key)


def _draw(mu: np.ndarray, sigma: np.ndarray, codes: np.ndarray, cut_ms: np.ndarray,
          u: np.ndarray) -> np.ndarray:
    """Latency given > cut from each step's fit; inf where the step has no fit (too few
    completed calls): a call we know nothing about is assumed to run into any limit."""
    out = np.full(len(codes), np.inf)
    fitted = ~np.isnan(mu[codes])
    if np.any(fitted):
        out[fitted] = draw_above(mu[codes[fitted]], sigma[codes[fitted]], cut_ms[fitted],
                                 u[fitted])
    return out


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
    span = _segment_max(member_end, prep.stage_first_step)
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
            drawn = _draw(prep.key_mu, prep.key_sigma, prep.key[idx], np.zeros(len(idx)),
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
        waiting = live & call & ~refused & (wait_ms > np.floor(remaining_ns / MS))
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
    end = np.where(waiting, start + np.floor(remaining_ns / MS) * MS + prep.cleanup_ns,
                   start + dur_ns)
    end = np.where(refused, start + np.minimum(prep.recorded_ns, 100_000.0), end)

    started = happened & call & ~refused
    deadline_cut = started & waiting
    # Attempts that timed out: the first (at its cap or at the deadline) and any new retries.
    timed_out_calls = np.where(started, (capped | deadline_cut) + extra_timeouts, 0)
    calls = np.where(started, 1 + extra_calls, 0)
    uses_fit = started & (
        (prep.recorded_timeout & ~prep.given_up_early
         & (np.minimum(cap, np.floor(np.maximum(remaining_ns, 0) / MS)) > prep.cut_ms))
        | prep.recorded_refused | (extra_calls > 0))

    run_end = _per_run_max(prep.run, np.where(happened, end, 0.0), prep.n_runs)
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
    recorded_exhausted = _recorded_exhausted(runs)
    exhausted = np.where(unchanged & budgeted, recorded_exhausted, exhausted)
    utilisation = np.where(unchanged, runs["utilisation"].to_numpy(dtype=float,
                                                                   na_value=np.nan),
                           utilisation)
    run_uses_fit = np.zeros(prep.n_runs, dtype=bool)
    run_uses_fit[prep.run[uses_fit]] = True

    return _result(prep, policy, cap, calls, timed_out_calls, refused & happened, started,
                   uses_fit, exhausted, utilisation, run_uses_fit, budgeted)


def _result(prep: Prepared, policy: SimulationPolicy, cap: np.ndarray, calls: np.ndarray,
            timeouts: np.ndarray, refused: np.ndarray, started: np.ndarray,
            uses_fit: np.ndarray, exhausted: np.ndarray, utilisation: np.ndarray,
            run_uses_fit: np.ndarray, budgeted: np.ndarray) -> SimulationResult:
    runs = prep.runs
    k = len(prep.keys)
    key = prep.key
    actual_calls_mask = prep.is_call & ~prep.recorded_refused
    actual = {
        "calls": np.bincount(key[actual_calls_mask], minlength=k),
        "timeouts": np.bincount(key[prep.recorded_timeout], minlength=k),
        "refused": np.bincount(key[prep.recorded_refused], minlength=k),
    }
    predicted = {
        "calls": np.bincount(key, weights=calls, minlength=k).astype(np.int64),
        "timeouts": np.bincount(key, weights=timeouts, minlength=k).astype(np.int64),
        "refused": np.bincount(key[refused], minlength=k),
        "fit_calls": np.bincount(key, weights=np.where(uses_fit, calls, 0),
                                 minlength=k).astype(np.int64),
    }
    actual_runs, actual_runs_timeout = _runs_per_key(prep, actual_calls_mask,
                                                     prep.recorded_timeout)
    predicted_runs, predicted_runs_timeout = _runs_per_key(prep, calls > 0, timeouts > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_actual = actual["timeouts"] / actual["calls"]
        p = predicted["timeouts"] / predicted["calls"]
        n_actual = actual["calls"] / actual_runs
        n_predicted = predicted["calls"] / predicted_runs
        replayed_actual = actual_runs_timeout / actual_runs
        replayed = predicted_runs_timeout / predicted_runs
    # The cap a step key runs under, when all its calls share one finite cap (else empty).
    policy_cap = np.full(k, np.nan)
    if len(key):
        by_key = np.argsort(key, kind="stable")
        starts = np.searchsorted(key[by_key], np.arange(k))
        present = np.bincount(key, minlength=k) > 0
        sorted_caps = cap[by_key]
        low = np.minimum.reduceat(sorted_caps, np.minimum(starts, len(key) - 1))
        high = np.maximum.reduceat(sorted_caps, np.minimum(starts, len(key) - 1))
        uniform = present & (low == high) & np.isfinite(high)
        policy_cap[uniform] = high[uniform]
    tools = pd.DataFrame({
        "step_key": prep.keys.astype(str),
        "cap_ms": policy_cap,
        "calls_actual": actual["calls"],
        "timeouts_actual": actual["timeouts"],
        "timeout_rate_actual": p_actual,
        "calls": predicted["calls"],
        "timeouts": predicted["timeouts"],
        "timeout_rate": p,
        "refused_actual": actual["refused"],
        "refused": predicted["refused"],
        "calls_per_run": n_predicted,
        "run_timeout_rate_formula": run_level_probability(p, n_predicted),
        "run_timeout_rate": replayed,
        "calls_per_run_actual": n_actual,
        "run_timeout_rate_formula_actual": run_level_probability(p_actual, n_actual),
        "run_timeout_rate_actual": replayed_actual,
        "censored_calls": prep.censored_per_key,
        "fit_calls": predicted["fit_calls"],
        "fit_median_ms": [f.median_ms if f else np.nan for f in prep.fits],
        "fit_sigma": [f.sigma if f else np.nan for f in prep.fits],
        "rests_on_fit": predicted["fit_calls"] > 0,
    })
    tools = tools[(tools["calls_actual"] + tools["refused_actual"] + tools["calls"]
                   + tools["refused"]) > 0].reset_index(drop=True)

    actual_util = runs["utilisation"].to_numpy(dtype=float, na_value=np.nan)[budgeted]
    actual_exhausted = _recorded_exhausted(runs)[budgeted]
    predicted_exhausted = exhausted[budgeted]
    predicted_util = utilisation[budgeted]
    beyond = actual_exhausted & ~predicted_exhausted
    fit_runs = run_uses_fit[budgeted]
    n_budgeted = int(budgeted.sum())
    fit_run_share = float(fit_runs.mean()) if n_budgeted else np.nan
    all_calls = int(calls.sum())
    fit_call_share = float(np.where(uses_fit, calls, 0).sum() / all_calls) if all_calls else np.nan
    writes_actual = int((prep.recorded_timeout & prep.is_write).sum())
    writes_predicted = int(np.where(prep.is_write, timeouts, 0).sum())
    run_any_timeout_actual = np.zeros(prep.n_runs, dtype=bool)
    run_any_timeout_actual[prep.run[prep.recorded_timeout]] = True
    run_any_timeout = np.zeros(prep.n_runs, dtype=bool)
    run_any_timeout[prep.run[timeouts > 0]] = True
    calls_actual = int(actual["calls"].sum())

    def rate(count: float, total: float) -> float:
        return count / total if total else np.nan

    rows: list[tuple[str, object, object, float]] = [
        ("runs", prep.n_runs, prep.n_runs, 0.0),
        ("budgeted_runs", n_budgeted, n_budgeted, 0.0),
        ("exhausted_runs", int(actual_exhausted.sum()), int(predicted_exhausted.sum()),
         fit_run_share),
        ("exhaustion_rate", rate(actual_exhausted.sum(), n_budgeted),
         rate(predicted_exhausted.sum(), n_budgeted), fit_run_share),
        # The replay cannot extend a record that ended early: counting every such run that the
        # policy lets through its recorded steps as exhausted gives the upper bound.
        ("exhaustion_rate_upper", rate(actual_exhausted.sum(), n_budgeted),
         rate((predicted_exhausted | beyond).sum(), n_budgeted), fit_run_share),
    ]
    for q in PERCENTILES:
        rows.append((f"utilisation_p{q}", _quantile(actual_util, q),
                     _quantile(predicted_util, q), fit_run_share))
    rows += [
        ("calls", calls_actual, all_calls, fit_call_share),
        ("client_timeouts", int(actual["timeouts"].sum()), int(timeouts.sum()), fit_call_share),
        ("client_timeout_rate", rate(actual["timeouts"].sum(), calls_actual),
         rate(timeouts.sum(), all_calls), fit_call_share),
        ("runs_with_client_timeout", int(run_any_timeout_actual.sum()),
         int(run_any_timeout.sum()), fit_run_share),
        ("refused", int(actual["refused"].sum()), int(refused.sum()), 0.0),
        ("write_timeouts", writes_actual, writes_predicted, fit_call_share),
        ("runs_beyond_record", 0, int(beyond.sum()), 0.0),
    ]
    # actual/predicted hold counts (ints) and rates (floats) side by side: object columns keep
    # each cell's type, so CSV shows 62 runs, not 62.000000.
    summary = pd.DataFrame({
        "metric": [r[0] for r in rows],
        "actual": pd.Series([r[1] for r in rows], dtype=object),
        "predicted": pd.Series([r[2] for r in rows], dtype=object),
        "fit_share": [float(r[3]) for r in rows],
    })

    run_frame = pd.DataFrame({
        "run_id": runs["run_id"].to_numpy()[budgeted],
        "agent": runs["agent"].to_numpy()[budgeted],
        "budget_ms": runs["budget_ms"].to_numpy()[budgeted],
        "utilisation_actual": actual_util,
        "utilisation": predicted_util,
        "exhausted_actual": actual_exhausted,
        "exhausted": predicted_exhausted,
        "rests_on_fit": fit_runs,
    })
    fits = pd.DataFrame({
        "step_key": prep.keys.astype(str),
        "median_ms": [f.median_ms if f else np.nan for f in prep.fits],
        "sigma": [f.sigma if f else np.nan for f in prep.fits],
        "exact_calls": [f.exact if f else 0 for f in prep.fits],
        "censored_calls": prep.censored_per_key,
    })
    return SimulationResult(policy, summary, tools, run_frame, fits)


def _runs_per_key(prep: Prepared, has_call: np.ndarray, has_timeout: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per key: runs with at least one call, and runs with at least one timeout."""
    k = len(prep.keys)

    def count(mask: np.ndarray) -> np.ndarray:
        # A runs × keys grid of flags (50k × 30 bytes) beats sorting 840k (run, key) pairs.
        seen = np.zeros((prep.n_runs, k), dtype=bool)
        seen[prep.run[mask], prep.key[mask]] = True
        return seen.sum(axis=0)

    return count(has_call), count(has_timeout)


def _quantile(values: np.ndarray, q: float) -> float:
    values = values[~np.isnan(values)]
    return float(np.quantile(values, q / 100.0)) if len(values) else np.nan


def simulate_frames(runs: pd.DataFrame, steps: pd.DataFrame,
                    policy: SimulationPolicy) -> SimulationResult:
    return replay(prepare(runs, steps), policy)


def recorded_caps(prep: Prepared) -> pd.DataFrame:
    """Per step key: kind, name, the most common recorded cap (ms; NaN when its calls carry
    none) and how many calls recorded one; what a policy editor starts from."""
    rows = []
    kinds = np.array([str(k).split(":", 1)[0] for k in prep.keys], dtype=object)
    finite = np.isfinite(prep.recorded_cap_ms) & prep.is_call & ~prep.recorded_timeout
    for code, key in enumerate(prep.keys):
        caps = prep.recorded_cap_ms[(prep.key == code) & finite]
        values, counts = np.unique(caps, return_counts=True)
        rows.append((str(key), kinds[code], str(prep.key_names[code]),
                     float(values[np.argmax(counts)]) if len(values) else np.nan, len(caps)))
    return pd.DataFrame(rows, columns=["step_key", "kind", "name", "cap_ms", "capped_calls"])


def typical_budget_ms(prep: Prepared) -> float:
    """The most common budget among the runs (NaN when none has one)."""
    budgets = prep.runs["budget_ms"].dropna()
    return float(budgets.mode().iloc[0]) if len(budgets) else np.nan
