"""What a replay reports (simulation/replay.py): per run, per step key and in summary, the
predicted figures beside the recorded ones, which of them rest on the fitted latency model, and
the arithmetic (per-call timeout probability p, calls per run n, 1 − (1 − p)^n) next to the
replayed share of runs with a timeout."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulation.fit import run_level_probability
from simulation.policy import SimulationPolicy
from simulation.prepare import PERCENTILES, Prepared, exhausted_as_recorded


@dataclass(frozen=True)
class SimulationResult:
    policy: SimulationPolicy
    summary: pd.DataFrame  # metric, actual, predicted, fit_share
    tools: pd.DataFrame  # one row per step key
    runs: pd.DataFrame  # one row per budgeted run: actual and predicted utilisation/exhaustion
    fits: pd.DataFrame = field(default_factory=pd.DataFrame)


def assemble_result(prep: Prepared, policy: SimulationPolicy, cap: np.ndarray,
                    calls: np.ndarray, timeouts: np.ndarray, refused: np.ndarray,
                    started: np.ndarray, uses_fit: np.ndarray, exhausted: np.ndarray,
                    utilisation: np.ndarray, run_uses_fit: np.ndarray,
                    budgeted: np.ndarray) -> SimulationResult:
    """The replay's per-call and per-run arrays (replay() in simulation/replay.py) as the
    result frames."""
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
    actual_exhausted = exhausted_as_recorded(runs)[budgeted]
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


