"""Words for counts, without pandas: what the commands that only declare or write
(`budgetscope budgets`, `prices`, `retain`) print, imported without the number formatting of
queries/readable.py (pandas, pyarrow, NumPy), which re-exports it (issue 48)."""

from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`1 run`, `2 runs`, `1,800 runs` (`plural_form` when adding an s is wrong)."""
    return f"{count:,} {noun if count == 1 else (plural_form or noun + 's')}"
