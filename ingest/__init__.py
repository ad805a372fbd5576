"""OTLP trace ingest: decode (protobuf, OTLP JSON), flatten to typed rows, store in DuckDB."""
