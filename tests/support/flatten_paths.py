"""The two ways a protobuf request becomes rows, side by side: the careful path (decode_request
+ flatten_request) that the receivers' fast flattener must equal row for row."""

from __future__ import annotations

from ingest.decode.flatten import flatten_request
from ingest.decode.proto_decode import decode_request
from store import FlatBatch


def careful(body: bytes, where: str = "") -> FlatBatch:
    request, rejections = decode_request(body, where)
    batch = flatten_request(request, where=where)
    batch.rejections[:0] = rejections
    return batch


def assert_same(fast: FlatBatch, slow: FlatBatch) -> None:
    assert fast.span_count == slow.span_count
    assert fast.spans == slow.spans
    assert fast.resources == slow.resources
    assert fast.scopes == slow.scopes
    assert fast.rejections == slow.rejections
