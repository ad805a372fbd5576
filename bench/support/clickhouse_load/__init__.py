"""Loading OTLP files into ClickHouse's otel_traces / otel_logs as the OpenTelemetry
Collector's ClickHouse exporter does: for tests and benches of the ClickHouse backend."""
