"""The JSON line a file-like sink writes for one record (ADR 0005).

``{"topic": ..., "key": <key JSON>, "value": <Debezium envelope>, "seq": n}`` - the envelope
is kept whole and wrapped rather than written bare, because a bare envelope cannot carry the key
(which columns identify the row) nor a tombstone (value null), and a consumer applying changes
needs both. The line is assembled from the already serialized bytes: nothing is encoded twice.
"""

from __future__ import annotations

import orjson

from airflow_cdc.engine.records import SerializedRecord


def record_line(record: SerializedRecord, seq: int | None = None) -> bytes:
    parts = [
        b'{"topic":',
        orjson.dumps(record.topic),
        b',"key":',
        record.key if record.key is not None else b"null",
        b',"value":',
        record.value if record.value is not None else b"null",
    ]
    if seq is not None:
        parts += [b',"seq":', str(seq).encode()]
    if record.record.timestamp_ms is not None:
        parts += [b',"ts_ms":', str(record.record.timestamp_ms).encode()]
    if record.headers:
        headers = {name: value.decode("utf-8", "backslashreplace") for name, value in record.headers}
        parts += [b',"headers":', orjson.dumps(headers)]
    parts.append(b"}\n")
    return b"".join(parts)
