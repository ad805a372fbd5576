"""Pure pandas for the Attribution page (docs/metrics.md §4): exhausted runs counted by holder
key × culprit key (also the Cost page's crosser × culprit matrix, cost_summaries), and the
exhausted runs one culprit key was blamed for.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashboard import fmt
from dashboard.summaries import numbered

OTHER = "(other)"


@dataclass(frozen=True)
class HolderCulprit:
    """Exhausted runs by holder key × culprit key, on one shared key order (so that a key's
    own cell sits on the diagonal of both axes), the most frequent keys first, OTHER last."""
    keys: list[str]
    # one row per non-empty cell: holder, culprit, runs, same_call (of those runs, how many
    # had the holder be the very culprit step)
    cells: pd.DataFrame
    runs: int  # exhausted runs with a culprit and a holder
    same_call: int  # ... whose holder is the culprit itself (docs/metrics.md §4)
    same_key: int  # ... whose holder has the culprit's step key (the same call included)


def holder_culprit(runs: pd.DataFrame, top: int = 10) -> HolderCulprit:
    """Exhausted runs counted by holder key × culprit key; keys beyond the `top` most frequent
    are grouped as OTHER."""
    exhausted = runs[runs["exhausted"].fillna(False).astype(bool)]
    exhausted = exhausted[exhausted["culprit"].notna() & exhausted["holder"].notna()]
    if exhausted.empty:
        return HolderCulprit([], pd.DataFrame(columns=["holder", "culprit", "runs",
                                                       "same_call"]), 0, 0, 0)
    counts = pd.concat([exhausted["culprit"], exhausted["holder"]]).value_counts()
    # by frequency, ties by key: one order for both axes
    ranked = sorted(counts.index, key=lambda key: (-int(counts[key]), str(key)))
    keep = set(ranked[:top])

    def bucket(key: str) -> str:
        return key if key in keep else OTHER

    same_call = (exhausted["culprit_step"] == exhausted["holder_step"]).fillna(False)
    frame = pd.DataFrame({"holder": exhausted["holder"].map(bucket),
                          "culprit": exhausted["culprit"].map(bucket),
                          "same_call": same_call.astype(int)})
    cells = frame.groupby(["holder", "culprit"], sort=False).agg(
        runs=("same_call", "size"), same_call=("same_call", "sum")).reset_index()
    keys = [key for key in ranked if key in keep]
    if (frame[["holder", "culprit"]] == OTHER).any(axis=None):
        keys.append(OTHER)
    same_key = int((exhausted["culprit"] == exhausted["holder"]).sum())
    return HolderCulprit(keys, cells, len(exhausted), int(same_call.sum()), same_key)


def exhausted_runs_of(runs: pd.DataFrame, culprit: str | None, limit: int = 200
                      ) -> pd.DataFrame:
    """Exhausted runs whose culprit is `culprit`, the largest culprit share first; `culprit`
    is the culprit's number in its run (#3: the key is the one asked for), the holder is
    named whole (#9 tool:fetch_report)."""
    exhausted = runs[runs["exhausted"].fillna(False).astype(bool) & (runs["culprit"] == culprit)]
    columns = ["run_id", "agent", "start", "outcome", "utilisation", "culprit",
               "culprit_share", "holder"]
    ordered = exhausted.sort_values(["culprit_share", "start"], ascending=[False, False])
    shown = numbered(ordered).assign(culprit=[
        fmt.NO_VALUE if fmt.missing(n) else f"#{int(n)}" for n in ordered["culprit_step"]])
    return shown[columns].head(limit).reset_index(drop=True)
