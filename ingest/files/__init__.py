"""OTLP files (.pb, .json, .jsonl, gzip, folders) -> rows -> the store."""
