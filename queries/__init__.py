"""The analytics of docs/metrics.md §1-§8: SQL files in sql/, a loader, and typed functions
returning DataFrames that the CLI and the dashboard both call (one implementation of each
number)."""
