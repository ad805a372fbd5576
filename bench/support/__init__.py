"""What the benchmarks share, standing on the product alone (never on tests/): the dashboard as
a subprocess and when a page counts as drawn (browser.py), raw OTLP requests (otlp.py), and the
Collector exporter's ClickHouse tables filled from OTLP files (clickhouse_load/). Tests that
need the same use these rather than a copy."""
