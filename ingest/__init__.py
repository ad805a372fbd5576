"""OTLP → rows for the store: what the commands and the server use of ingest.

- `decode/`: protobuf and OTLP JSON requests (traces, logs) → `store.FlatBatch`, refusing
  what docs/metrics.md §2 refuses with a reason (`store.Rejection`);
- `files/`: OTLP files and folders (.pb, .json, .jsonl, gzip) loaded into the DuckDB file;
- `receivers/`: OTLP/HTTP and OTLP/gRPC in front of the store's group-commit writer; the
  routes a caller serves beside the exports are handed in (`ReceiverConfig.routes`).

The names below are the front; everything else is reached through its module. They are
imported on first use, so that importing one decoder does not load gRPC.
"""

from __future__ import annotations

import importlib
from typing import Any

_FRONT = {
    "flatten_request": "ingest.decode.flatten",
    "load_files": "ingest.files.loader",
    "LoadSummary": "ingest.files.loader",
    "Receivers": "ingest.receivers.service",
    "ReceiverConfig": "ingest.receivers.service",
    "ReceiverParts": "ingest.receivers.service",
}
__all__ = sorted(_FRONT)


def __getattr__(name: str) -> Any:
    if name not in _FRONT:
        raise AttributeError(f"module 'ingest' has no attribute {name!r}")
    return getattr(importlib.import_module(_FRONT[name]), name)
