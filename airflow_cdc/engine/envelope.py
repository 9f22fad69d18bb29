"""Debezium's change-event envelope, as plain dicts.

The value of a change event is ``{"before", "after", "source", "transaction", "op", "ts_ms",
"ts_us", "ts_ns"}`` in this order, exactly as Debezium's JSON converter writes it with
``schemas.enable=false``. Sources fill ``source`` with their connector-specific fields
(``lsn`` for PostgreSQL, ``file``/``pos``/``gtid`` for MySQL).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from typing import Any

from airflow_cdc import __version__


class Op(enum.StrEnum):
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"  # a snapshot read
    TRUNCATE = "t"
    MESSAGE = "m"  # a logical decoding message


def source_info(
    *,
    connector: str,
    name: str,
    ts_ns: int,
    db: str,
    snapshot: str = "false",
    **extra: Any,
) -> dict[str, Any]:
    """The common head of Debezium's ``source`` block, then the connector's own fields."""
    info: dict[str, Any] = {
        "version": __version__,
        "connector": connector,
        "name": name,
        "ts_ms": ts_ns // 1_000_000,
        "snapshot": snapshot,
        "db": db,
        "sequence": None,
        "ts_us": ts_ns // 1_000,
        "ts_ns": ts_ns,
    }
    info.update(extra)
    return info


def change_envelope(
    op: Op | str,
    *,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    source: Mapping[str, Any],
    transaction: Mapping[str, Any] | None = None,
    ts_ns: int | None = None,
) -> dict[str, Any]:
    """A Debezium change-event value. ``ts_*`` is when the engine processed the event."""
    processed_ns = time.time_ns() if ts_ns is None else ts_ns
    return {
        "before": before,
        "after": after,
        "source": source,
        "transaction": transaction,
        "op": str(op),
        "ts_ms": processed_ns // 1_000_000,
        "ts_us": processed_ns // 1_000,
        "ts_ns": processed_ns,
    }
