"""The database: its file and owner, schema and migrations, the row contract, the writer and
its group commit, derivation and when it runs, retention, declared budgets, and the one way
every command and the dashboard open what they read (`store.reader`), on DuckDB or ClickHouse.

Nothing here imports another package of budgetscope: everything else stands on it
(docs/design.md, "Layers"; tests/test_layers.py keeps that true).
"""
