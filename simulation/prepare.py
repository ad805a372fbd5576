"""The prepared form of the stored runs for the timeout-policy replay (simulation/replay.py):
steps ordered and grouped into stages, what each call's latency is known to be (exact, or only
above its cut), the per-step log-normal fits on completed and censored calls together, and the
seeded draws, made once per data set so that moving a slider never reshuffles them. Pure numpy
on the frames simulation/data.py reads; never a connection."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulation.fit import LognormalFit, draw_above, fit_lognormal

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


def _check(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SimulationInputError(f"{what} frame lacks columns {missing}")


def segment_max(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
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


def exhausted_as_recorded(runs: pd.DataFrame) -> np.ndarray:
    """runs.exhausted as booleans; unknown (no budget) counts as not exhausted."""
    return runs["exhausted"].astype(object).where(runs["exhausted"].notna(), False) \
        .astype(bool).to_numpy()


def per_run_max(run: np.ndarray, values: np.ndarray, n_runs: int) -> np.ndarray:
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
    run_last_end = per_run_max(run, end.astype(float), n_runs)
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

    # Uniforms on (0, 1], turned around in place: no temporary as large as the draws (retry_u
    # is 19 MB at 586k steps, and fresh memory is what prepare pays most for on a busy host).
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    np.subtract(1.0, u, out=u)
    latency = np.where(exact, duration_ms, np.nan)
    unknown = censored | recorded_refused
    latency[unknown] = draw_latency(key_mu, key_sigma, key_codes[unknown],
                             np.where(censored, cut, 0.0)[unknown], u[unknown])
    retry_u = rng.random((n, EXTRA_ATTEMPTS))
    np.subtract(1.0, retry_u, out=retry_u)

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


def draw_latency(mu: np.ndarray, sigma: np.ndarray, codes: np.ndarray, cut_ms: np.ndarray,
          u: np.ndarray) -> np.ndarray:
    """Latency given > cut from each step's fit; inf where the step has no fit (too few
    completed calls): a call we know nothing about is assumed to run into any limit."""
    out = np.full(len(codes), np.inf)
    fitted = ~np.isnan(mu[codes])
    if np.any(fitted):
        out[fitted] = draw_above(mu[codes[fitted]], sigma[codes[fitted]], cut_ms[fitted],
                                 u[fitted])
    return out


def recorded_caps(prep: Prepared) -> pd.DataFrame:
    """Per step key: kind, name, the most common recorded cap (ms; NaN when its calls carry
    none), how many calls recorded one, and the 95th percentile of its calls' recorded
    durations (ms; NaN without calls), which a policy editor starts an uncapped key's cap at."""
    rows = []
    kinds = np.array([str(k).split(":", 1)[0] for k in prep.keys], dtype=object)
    finite = np.isfinite(prep.recorded_cap_ms) & prep.is_call & ~prep.recorded_timeout
    durations_ms = prep.recorded_ns / MS
    for code, key in enumerate(prep.keys):
        caps = prep.recorded_cap_ms[(prep.key == code) & finite]
        values, counts = np.unique(caps, return_counts=True)
        calls = durations_ms[(prep.key == code) & prep.is_call]
        rows.append((str(key), kinds[code], str(prep.key_names[code]),
                     float(values[np.argmax(counts)]) if len(values) else np.nan, len(caps),
                     float(np.quantile(calls, 0.95)) if len(calls) else np.nan))
    return pd.DataFrame(rows, columns=["step_key", "kind", "name", "cap_ms", "capped_calls",
                                       "p95_ms"])


def typical_budget_ms(prep: Prepared) -> float:
    """The most common budget among the runs (NaN when none has one)."""
    budgets = prep.runs["budget_ms"].dropna()
    return float(budgets.mode().iloc[0]) if len(budgets) else np.nan
