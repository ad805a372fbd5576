"""OTLP bytes (protobuf, JSON) -> the store's rows (store.FlatBatch)."""
