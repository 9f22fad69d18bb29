"""The watermark rows an incremental snapshot writes into the signal table, as Debezium writes
them: id ``<uuid>-open`` / ``<uuid>-close``, type ``snapshot-window-open`` / ``-close``, and a
``data`` JSON naming when the window opened (and closed), the signal that asked for the snapshot
and the table (``SignalMetadata``). They are change events of the signal table like any other,
so a consumer of Debezium's watermarks reads ours unchanged."""

from __future__ import annotations

import time
import uuid

import orjson


def window_id() -> str:
    """A new window's id: a random UUID in its usual dashed form, as Debezium's."""
    return str(uuid.uuid4())


def instant(ns: int) -> str:
    """Java's ``Instant.toString()``: ISO-8601 UTC, the fraction in 3, 6 or 9 digits, none if zero."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    if nanos == 0:
        return base + "Z"
    if nanos % 1_000_000 == 0:
        return f"{base}.{nanos // 1_000_000:03d}Z"
    if nanos % 1_000 == 0:
        return f"{base}.{nanos // 1_000:06d}Z"
    return f"{base}.{nanos:09d}Z"


def metadata(opened_ns: int, closed_ns: int | None, correlation_id: str | None, table: str | None) -> str:
    """The ``data`` of a watermark row: Debezium's field order, with its ``": "`` and ``", "``."""
    fields: dict[str, str] = {"openWindowTimestamp": instant(opened_ns)}
    if closed_ns is not None:
        fields["closeWindowTimestamp"] = instant(closed_ns)
    if correlation_id is not None:
        fields["correlationId"] = correlation_id
    if table is not None:
        fields["dataCollectionId"] = table
    return "{" + ", ".join(f"{orjson.dumps(k).decode()}: {orjson.dumps(v).decode()}" for k, v in fields.items()) + "}"
