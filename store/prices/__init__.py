"""Model prices (docs/metrics.md §11.3): the bundled table and the prices a team sets.

- bundled.py: genai-prices, the table shipped with budgetscope (pinned in uv.lock, never
  fetched, imported only when a new model needs matching): each (model, provider) pair of a
  metered span is matched once through its public API and kept in tables, so that the
  derivation prices spans in SQL (store/derive/sql/derive_cost.sql); a new version of the
  table matches every pair again and re-measures the runs it priced;
- overrides.py: `budgetscope prices set/unset` — checked, stored, and the runs they re-price
  marked for re-measuring in one transaction; `list` and `check`.
"""
