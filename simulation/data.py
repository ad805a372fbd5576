"""The stored data the timeout-policy replay needs, read by SQL (queries/sql/simulation_*.sql)
into DataFrames; and `simulate`, which reads them and replays (simulation/replay.py). `con`
is a DuckDB connection or another dialect's backend (queries.loader.frame picks the query of
the same name in its dialect): a second backend only has to return the same two frames."""

from __future__ import annotations

import pandas as pd

from queries.filters import Filters
from queries.loader import Connection, arrow_frame, frame
from simulation.policy import SimulationPolicy
from simulation.replay import SimulationResult, prepare, replay

NO_FILTERS = Filters()


def simulation_runs(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row per run in the filter, numbered 0..n-1 by run_id (run_index)."""
    return frame(con, "simulation_runs", filters.parameters())


def simulation_steps(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Top-level steps of those runs, in no particular order (the replay sorts them). Columns
    are Arrow-backed (queries.loader.arrow_frame): ~600k rows at 35,000 runs, read only to be
    turned into numpy arrays."""
    return arrow_frame(con, "simulation_steps", filters.parameters())


def simulate(con: Connection, policy: SimulationPolicy,
             filters: Filters = NO_FILTERS) -> SimulationResult:
    """The runs in `filters` replayed under `policy`, beside what actually happened."""
    return replay(prepare(simulation_runs(con, filters), simulation_steps(con, filters)), policy)
