"""What if's cumulative distribution (dashboard/simulation_figures.cdf_points): thinned to a few
points per 0.1 percentage point of utilisation, every point it keeps exact, and the curve it
draws nowhere further than a bin from the full one."""

from __future__ import annotations

import numpy as np

from dashboard.simulation_figures import CDF_RESOLUTION, cdf_points


def utilisations(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Runs as recorded: most well under budget, a tail past it, and ties (a deadline that
    # fired lands many runs on the same utilisation).
    values = np.concatenate([rng.lognormal(-0.7, 0.5, n - n // 10), np.full(n // 10, 1.0)])
    return np.sort(values)


def test_every_point_kept_is_exact_ties_included() -> None:
    values = utilisations(35_000)
    x, share, count = cdf_points(values)
    assert np.all(np.diff(x) > 0)
    assert list(count) == [int((values <= v).sum()) for v in x]
    np.testing.assert_allclose(share, count / len(values))
    assert count[-1] == len(values)  # the curve reaches 100%
    assert x[0] == values[0]  # and starts where the runs start


def test_the_points_are_bounded_by_the_bins_not_the_runs() -> None:
    values = utilisations(35_000)
    x, _, _ = cdf_points(values)
    bins = len(np.unique(np.floor(values / CDF_RESOLUTION)))
    assert len(x) <= 2 * bins
    assert len(x) < len(values) / 5


def test_the_drawn_steps_are_within_a_bin_of_the_full_curve() -> None:
    """Drawn as 'hv' steps, the share at any run's utilisation v is that of the last point at or
    below v: never above the true share at v, never below the true share a bin lower."""
    values = utilisations(20_000, seed=3)
    x, share, _ = cdf_points(values)
    drawn = share[np.searchsorted(x, values, side="right") - 1]
    true_at = np.searchsorted(values, values, side="right") / len(values)
    a_bin_lower = np.searchsorted(values, values - CDF_RESOLUTION, side="right") / len(values)
    assert np.all(drawn <= true_at + 1e-12)
    assert np.all(drawn >= a_bin_lower - 1e-12)


def test_a_few_runs_are_drawn_run_by_run() -> None:
    values = np.array([0.2, 0.5, 0.5, 0.9])
    x, share, count = cdf_points(values)
    assert list(x) == [0.2, 0.5, 0.9]
    assert list(count) == [1, 3, 4]
    assert list(share) == [0.25, 0.75, 1.0]
