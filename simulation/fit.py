"""Per-step latency model for the replay: a log-normal fitted by maximum likelihood with
right-censoring, on completed calls (exact latency) and timed-out or cancelled calls together
(a call cut at c only says latency > c). Dropping the censored calls would fit only the calls
that were fast enough to finish and understate the tail exactly where a looser cap matters.

The maximum is found by expectation-maximisation on log latency: a censored value is replaced by
its expected value (and square) under the current normal given that it lies above its cut
point, then mean and variance are re-estimated; the likelihood never decreases, and calls cut at
the same point are handled once with a count (caps repeat, so this is a few hundred points).
Pure numpy: no scipy in the dependencies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_EXACT = 3  # fewer completed calls than this: no fit, the tail stays unknown
_MAX_ITERATIONS = 500
_TOLERANCE = 1e-7
_MIN_LATENCY_MS = 1e-3  # a 0 ms call (clock resolution) has no logarithm
_SQRT2 = math.sqrt(2.0)


def erfc(x: np.ndarray) -> np.ndarray:
    """Complementary error function, Chebyshev fit (fractional error < 1.2e-7 everywhere)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    answer = t * np.exp(poly)
    return np.where(x >= 0, answer, 2.0 - answer)


def normal_sf(z: np.ndarray) -> np.ndarray:
    """P(Z > z) for a standard normal."""
    return 0.5 * erfc(np.asarray(z, dtype=float) / _SQRT2)


def _mills(a: np.ndarray) -> np.ndarray:
    """E[Z | Z > a] = φ(a) / S(a), with its asymptote far in the tail where both underflow."""
    a = np.asarray(a, dtype=float)
    safe = np.minimum(a, 30.0)
    pdf = np.exp(-0.5 * safe * safe) / math.sqrt(2 * math.pi)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = pdf / normal_sf(safe)
    big = np.maximum(a, 8.0)
    return np.where(a > 8, big + 1.0 / big - 2.0 / big**3, ratio)


@dataclass(frozen=True)
class LognormalFit:
    """log latency ~ Normal(mu, sigma²), latency in ms."""

    mu: float
    sigma: float
    exact: int
    censored: int
    iterations: int

    @property
    def median_ms(self) -> float:
        return math.exp(self.mu)

    def survival(self, latency_ms: np.ndarray) -> np.ndarray:
        """P(latency > x)."""
        x = np.maximum(np.asarray(latency_ms, dtype=float), _MIN_LATENCY_MS)
        return normal_sf((np.log(x) - self.mu) / self.sigma)

    def draw_above(self, cut_ms: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Latencies drawn given latency > cut (cut 0: unconditional)."""
        cut = np.asarray(cut_ms, dtype=float)
        return draw_above(np.full(cut.shape, self.mu), np.full(cut.shape, self.sigma), cut, u)


def draw_above(mu: np.ndarray, sigma: np.ndarray, cut_ms: np.ndarray,
               u: np.ndarray) -> np.ndarray:
    """Log-normal(mu, sigma) latencies given latency > cut (cut <= 0: unconditional), one per
    element, by inverting the survival function: S(x) = u · S(cut), u uniform in (0, 1]."""
    cut = np.maximum(np.asarray(cut_ms, dtype=float), 0.0)
    z_cut = (np.log(np.maximum(cut, _MIN_LATENCY_MS)) - mu) / sigma
    tail = np.where(cut > 0, normal_sf(z_cut), 1.0) * u
    z = -inverse_cdf(tail)  # S(x) = tail ⇔ Φ(z) = 1 - tail ⇔ z = -Φ⁻¹(tail)
    drawn = np.exp(mu + sigma * z)
    # Far beyond any data (a tail below double precision): just above the cut.
    return np.maximum(drawn, np.nextafter(cut, np.inf))


# Acklam's rational approximation of the normal quantile (relative error < 1.2e-9 over
# (0, 1)), vectorised: the stdlib's NormalDist.inv_cdf is exact but one value per call (~1 µs),
# and the replay draws for every call a tighter or looser cap might retry.
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155288572e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00)
_P_LOW = 0.02425


def _tail_quantile(q: np.ndarray) -> np.ndarray:
    numerator = ((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]
    denominator = (((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0
    return numerator / denominator


def inverse_cdf(p: np.ndarray) -> np.ndarray:
    """Φ⁻¹(p) for p in (0, 1)."""
    p = np.clip(np.asarray(p, dtype=float), 1e-300, 1.0 - 1e-16)
    q = p - 0.5
    r = q * q
    central = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q / (
        ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0)
    low = _tail_quantile(np.sqrt(-2.0 * np.log(np.minimum(p, 0.5))))
    high = -_tail_quantile(np.sqrt(-2.0 * np.log(np.maximum(1.0 - p, 1e-300))))
    return np.where(p < _P_LOW, low, np.where(p > 1.0 - _P_LOW, high, central))


def fit_lognormal(exact_ms: np.ndarray, censored_at_ms: np.ndarray) -> LognormalFit | None:
    """Maximum-likelihood log-normal from exact latencies and right-censored cut points."""
    exact = np.log(np.maximum(np.asarray(exact_ms, dtype=float), _MIN_LATENCY_MS))
    cuts = np.log(np.maximum(np.asarray(censored_at_ms, dtype=float), _MIN_LATENCY_MS))
    if len(exact) < MIN_EXACT:
        return None
    cut_values, cut_counts = np.unique(cuts, return_counts=True)
    n = len(exact) + len(cuts)
    sum_exact, sum_exact_sq = exact.sum(), (exact * exact).sum()
    mu = float(np.concatenate([exact, cuts]).mean())
    sigma = max(float(np.concatenate([exact, cuts]).std()), 1e-3)
    iterations = 0
    for iterations in range(1, _MAX_ITERATIONS + 1):  # noqa: B007 - reported as the count
        if len(cut_values):
            lam = _mills((cut_values - mu) / sigma)
            expected = mu + sigma * lam
            expected_sq = mu * mu + sigma * sigma + sigma * lam * (mu + cut_values)
            total = sum_exact + (cut_counts * expected).sum()
            total_sq = sum_exact_sq + (cut_counts * expected_sq).sum()
        else:
            total, total_sq = sum_exact, sum_exact_sq
        new_mu = total / n
        new_sigma = math.sqrt(max(total_sq / n - new_mu * new_mu, 1e-12))
        done = abs(new_mu - mu) < _TOLERANCE and abs(new_sigma - sigma) < _TOLERANCE
        mu, sigma = float(new_mu), max(float(new_sigma), 1e-3)
        if done:
            break
    return LognormalFit(mu, sigma, len(exact), len(cuts), iterations)


def run_level_probability(p: float | np.ndarray, n: float | np.ndarray) -> float | np.ndarray:
    """P(at least one of n independent calls times out) = 1 - (1 - p)^n.

    Six calls at p = 6% give 1 - 0.94^6 ≈ 31%. Calls in one run are not independent (they
    share a deadline and a slow upstream), which is why the replay's own figure is shown
    beside this one."""
    return 1.0 - (1.0 - np.asarray(p, dtype=float)) ** np.asarray(n, dtype=float)
