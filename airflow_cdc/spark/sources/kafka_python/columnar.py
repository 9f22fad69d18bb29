"""Records as columns, and columns as Arrow: the decoding that makes the source fast.

:func:`decode_records` is sans-IO: it reads the records of a magic-2 record batch's
(uncompressed) body from bytes. Getting those bytes out of kafka-python, and making its
fetcher hand batches over undecoded, is :mod:`.kafka_internals`'s business."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
from kafka.record.util import decode_varint

#: Rows per Arrow batch a task yields: large enough to amortise the per-batch cost, small
#: enough to keep a task's memory at a few MB.
BATCH_ROWS = 10_000
#: ... and at most about this many bytes, far from Arrow's 2 GiB per string column.
BATCH_BYTES = 32 * 1024 * 1024
#: The Arrow schema of the raw frame (what Spark derives from ``RAW_SCHEMA``).
ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
    ]
)


class Columns:
    """Records of one partition as three columns: offsets, keys and values (bytes or None)."""

    __slots__ = ("keys", "nbytes", "offset", "offsets", "values")

    def __init__(
        self, offsets: list[int] | None = None, keys: list[Any] | None = None, values: list[Any] | None = None
    ) -> None:
        self.offsets: list[int] = offsets if offsets is not None else []
        self.keys: list[Any] = keys if keys is not None else []
        self.values: list[Any] = values if values is not None else []
        #: The first offset: kafka-python's fetcher drops "records" below the fetch offset by it.
        self.offset = self.offsets[0] if self.offsets else -1
        self.nbytes = 0

    @classmethod
    def of_records(cls, records: list[Any]) -> Columns:
        """kafka-python ``ConsumerRecord``s (topic, partition, leader_epoch, offset, timestamp,
        timestamp_type, key, value, ...) as columns."""
        columns = list(zip(*records, strict=False))
        result = cls(list(columns[3]), list(columns[6]), list(columns[7]))
        result.nbytes = sum(r.serialized_key_size + r.serialized_value_size for r in records)
        return result

    def before(self, end: int) -> Columns:
        """Only the records with offsets below ``end``."""
        if not self.offsets or self.offsets[-1] < end:
            return self
        cut = bisect.bisect_left(self.offsets, end)
        return Columns(self.offsets[:cut], self.keys[:cut], self.values[:cut])

    def columns(self) -> Columns:
        return self

    def extend(self, other: Columns) -> None:
        self.offsets += other.offsets
        self.keys += other.keys
        self.values += other.values
        self.nbytes += other.nbytes

    def fits(self, other: Columns) -> bool:
        """Whether ``other`` may join these columns in one Arrow batch (BATCH_ROWS, BATCH_BYTES)."""
        if not self.offsets:
            return True
        return len(self.offsets) + len(other.offsets) <= BATCH_ROWS and self.nbytes + other.nbytes <= BATCH_BYTES

    def to_arrow(self, topic: str, partition: int) -> pa.RecordBatch:
        """One Arrow batch of the raw frame, built from buffers: no Python loop per row, and no
        ``pa.array``/``pa.scalar`` (whose first call imports pandas: 0.4 s in every new worker)."""
        count = len(self.offsets)
        return pa.RecordBatch.from_arrays(
            [
                _repeated_text(topic, count),
                pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(np.full(count, partition, np.int32))]),
                pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(np.array(self.offsets, np.int64))]),
                utf8(self.keys),
                utf8(self.values),
            ],
            schema=ARROW_SCHEMA,
        )


def _repeated_text(text: str, count: int) -> pa.Array:
    """``text`` ``count`` times (the topic column)."""
    data = text.encode()
    offsets = (np.arange(count + 1, dtype=np.int64) * len(data)).astype(np.int32)
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data * count))


def utf8(blobs: list[bytes | None]) -> pa.Array:
    """Bytes (None stays null) as Arrow text; invalid UTF-8 becomes U+FFFD rather than failing."""
    count = len(blobs)
    validity, nulls = None, 0
    if None in blobs:
        present = np.fromiter((b is not None for b in blobs), np.bool_, count)
        validity, nulls = pa.py_buffer(np.packbits(present, bitorder="little")), count - int(present.sum())
    data: list[bytes] = [b"" if b is None else b for b in blobs] if nulls else blobs  # type: ignore[assignment]
    ends = np.cumsum(np.fromiter(map(len, data), np.int64, count))
    if count and ends[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{ends[-1]} bytes of keys or values do not fit one Arrow batch")
    offsets = np.zeros(count + 1, np.int32)
    offsets[1:] = ends
    text = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(b"".join(data)), validity, nulls)
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in blobs], pa.string())
    return text


def decode_records(buf: bytes, pos: int, count: int, base: int, columns: Columns) -> int:
    """Appends ``count`` records from ``buf[pos:]`` to ``columns``; returns where they end.

    The hot loop of a read, hence inlined varints: the record's length is only needed to skip
    headers, which CDC records rarely have; the timestamp is not needed at all."""
    offsets, keys, values = columns.offsets.append, columns.keys.append, columns.values.append
    for _ in range(count):
        start = pos
        while buf[pos] >= 128:  # the record's length
            pos += 1
        pos += 2  # its last byte, and the attributes
        while buf[pos] >= 128:  # the timestamp delta
            pos += 1
        x = buf[pos + 1]
        if x < 128:
            offsets(base + ((x >> 1) ^ -(x & 1)))
            pos += 2
        elif buf[pos + 2] < 128:  # batches of up to 8192 records
            raw = (x & 127) | (buf[pos + 2] << 7)
            offsets(base + ((raw >> 1) ^ -(raw & 1)))
            pos += 3
        else:
            delta, pos = decode_varint(buf, pos + 1)
            offsets(base + delta)
        key, pos = _sized_bytes(buf, pos)
        keys(key)
        value, pos = _sized_bytes(buf, pos)
        values(value)
        if buf[pos]:  # headers: skip them by the record's length
            length, pos = decode_varint(buf, start)
            pos += length
        else:
            pos += 1
    return pos


def _sized_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """A varint length (-1: null) and that many bytes; lengths up to 8 KiB take one or two bytes."""
    x = buf[pos]
    if x < 128:
        size, pos = (x >> 1) ^ -(x & 1), pos + 1
    elif buf[pos + 1] < 128:
        raw = (x & 127) | (buf[pos + 1] << 7)
        size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
    else:
        size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    return buf[pos : pos + size], pos + size
