"""The models seen without a price, and the command that prices each (docs/metrics.md §11.3
step 3): what `budgetscope prices check` prints and the dashboard's Cost page lists, worded
once here so that both name the same command.

The rows are the store's (store.unpriced_models, or store.clickhouse_prices.unpriced on the
ClickHouse backend, over every stored trace, as `prices check` reads them); a model name is
span data, given as it was sent: the caller makes it inert for its medium (queries.terminal
for a terminal, a table or a code block on a page).
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd

from store import unpriced_models

CHECK_COLUMNS = ["model", "provider", "steps", "spans", "runs", "command"]


def set_command_for(model: str | None, provider: str | None) -> str:
    """The command that prices a model seen without a price (values to fill in: X); empty for
    spans that name no model (nothing to price by name)."""
    if model is None:
        return ""
    words = ["budgetscope", "prices", "set", shlex.quote(model)]
    if provider:
        words += ["--provider", shlex.quote(provider)]
    return " ".join([*words, "--input", "X", "--output", "X"])


def with_commands(unpriced: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`prices check`'s rows (the store's listing, here or from a server's /prices), each with
    the command that prices it."""
    return [{**row, "command": set_command_for(row["model"], row["provider"])}
            for row in unpriced]


def price_check(con: Any) -> pd.DataFrame:
    """Every model seen on metered spans without a price, the most steps first: model,
    provider, steps, spans, runs and the command (CHECK_COLUMNS). On a DuckDB connection the
    file's; on the ClickHouse backend's (store.clickhouse.ClickHouseConnection) its derived
    tables', as `budgetscope --backend … prices check` lists them (the derivation current:
    store.reader makes it so before handing the connection over)."""
    if getattr(con, "dialect", "duckdb") == "clickhouse":
        from store import clickhouse_prices  # the backend's modules load on first use

        found = clickhouse_prices.unpriced(con)
    else:
        found = unpriced_models(con)
    rows = with_commands([row.to_json() for row in found])
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)
