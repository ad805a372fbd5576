"""The stored data the timeout-policy replay needs, read by SQL (queries/sql/simulation_*.sql)
into DataFrames; and `simulate`, which reads them and replays (queries/simulation.py). A second
backend only has to return the same two frames."""

from __future__ import annotations

import duckdb
import pandas as pd

from queries.filters import Filters
from queries.loader import execute
from queries.simulation import SimulationResult, prepare, replay
from queries.simulation_policy import SimulationPolicy

NO_FILTERS = Filters()


def simulation_runs(con: duckdb.DuckDBPyConnection,
                    filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row per run in the filter, numbered 0..n-1 by run_id (run_index)."""
    return execute(con, "simulation_runs", filters.parameters()).df()


def simulation_steps(con: duckdb.DuckDBPyConnection,
                     filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Top-level steps of those runs, by run_index then start."""
    return execute(con, "simulation_steps", filters.parameters()).df()


def simulate(con: duckdb.DuckDBPyConnection, policy: SimulationPolicy,
             filters: Filters = NO_FILTERS) -> SimulationResult:
    """The runs in `filters` replayed under `policy`, beside what actually happened."""
    return replay(prepare(simulation_runs(con, filters), simulation_steps(con, filters)), policy)
