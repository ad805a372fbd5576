"""OTLP receivers (HTTP and gRPC) that hand decoded batches to the group-commit writer."""
