"""The ClickHouse backend's tests (store/clickhouse/, queries/translate.py), on chdb in-process:
the reports and the derivation on ClickHouse give DuckDB's answers, byte for byte and row for
row (the conventions' and the cost tests' traces included), logs, usage reads, and the
translation of the report queries."""
