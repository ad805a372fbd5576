"""Just enough of the protobuf wire format to split a message into its fields.

The generated classes parse a message all or nothing. These helpers let the decoder fall back to
parsing field by field, so that one span with invalid UTF-8 refuses that span, not its batch,
and so that a file holding one huge message can be read piece by piece with flat memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message; `offset` is where it went wrong."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at byte offset {offset}")
        self.offset = offset


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise WireError("truncated varint", start)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise WireError("varint longer than 10 bytes", start)


def iter_fields(data: bytes, base_offset: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value start, value end) for each field; offsets are absolute."""
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        tag_at = pos
        tag, pos = read_varint(view, pos)
        field, wire_type = tag >> 3, tag & 7
        if field == 0:
            raise WireError("field number 0", base_offset + tag_at)
        if wire_type == VARINT:
            _, end = read_varint(view, pos)
        elif wire_type == FIXED64:
            end = pos + 8
        elif wire_type == FIXED32:
            end = pos + 4
        elif wire_type == LENGTH_DELIMITED:
            length, pos = read_varint(view, pos)
            end = pos + length
        else:
            raise WireError(f"unsupported wire type {wire_type}", base_offset + tag_at)
        if end > len(data):
            raise WireError("field runs past the end of the message", base_offset + tag_at)
        yield field, wire_type, base_offset + pos, base_offset + end
        pos = end


def read_stream_varint(stream: BinaryIO, offset: int) -> tuple[int, int] | None:
    """A varint read from a stream: (value, bytes used), or None at a clean end of stream."""
    result = shift = used = 0
    while True:
        byte = stream.read(1)
        if not byte:
            if used == 0:
                return None
            raise WireError("truncated varint", offset)
        used += 1
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result, used
        shift += 7
        if shift >= 64:
            raise WireError("varint longer than 10 bytes", offset)


# Bytes asked of a stream at a time. A length prefix is only the input's claim (up to 2**64 - 1);
# asked for in one call, Python refuses a length past the index range (OverflowError) and may
# try to allocate a large one before reading anything.
_READ_PIECE = 1 << 20


def _pieces(stream: BinaryIO, length: int, offset: int) -> Iterator[bytes]:
    """The next `length` bytes of `stream`, which start at `offset`, a bounded piece at a time;
    WireError when it ends first."""
    left = length
    while left:
        piece = stream.read(min(left, _READ_PIECE))
        if not piece:
            raise WireError("message truncated", offset + length - left)
        left -= len(piece)
        yield piece


def read_exactly(stream: BinaryIO, length: int, offset: int) -> bytes:
    """The next `length` bytes of `stream`, which start at `offset`; WireError when it ends
    first."""
    return b"".join(_pieces(stream, length, offset))


def skip_exactly(stream: BinaryIO, length: int, offset: int) -> None:
    """Consume the next `length` bytes of `stream` without keeping them (a field we do not
    read); WireError when it ends first."""
    for _ in _pieces(stream, length, offset):
        pass


def iter_stream_fields(
    stream: BinaryIO, length: int | None, base_offset: int
) -> Iterator[tuple[int, int, int, int]]:
    """Like iter_fields, over `length` bytes of a stream (None: to its end), without reading
    length-delimited values: (field, wire type, value offset, value length). The caller must
    consume exactly `value length` bytes of each length-delimited value before the next step;
    other values are consumed here."""
    offset = base_offset
    end = None if length is None else base_offset + length
    while end is None or offset < end:
        tag_at = offset
        read = read_stream_varint(stream, offset)
        if read is None:
            if end is not None:
                raise WireError("message truncated", offset)
            return
        tag, used = read
        offset += used
        field, wire_type = tag >> 3, tag & 7
        if field == 0:
            raise WireError("field number 0", tag_at)
        if wire_type == LENGTH_DELIMITED:
            read = read_stream_varint(stream, offset)
            if read is None:
                raise WireError("message truncated", offset)
            value_length, used = read
            offset += used
            if end is not None and offset + value_length > end:
                raise WireError("field runs past the end of the message", tag_at)
            yield field, wire_type, offset, value_length
            offset += value_length
            continue
        if wire_type == VARINT:
            read = read_stream_varint(stream, offset)
            if read is None:
                raise WireError("message truncated", offset)
            offset += read[1]
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            if len(stream.read(size)) != size:
                raise WireError("message truncated", offset)
            offset += size
        else:
            raise WireError(f"unsupported wire type {wire_type}", tag_at)
        yield field, wire_type, offset, 0
