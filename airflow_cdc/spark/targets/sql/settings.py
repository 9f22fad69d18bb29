"""Where and how a SQL target applies: :class:`SqlTargetSettings`, sent to the executors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.spark.values import Modes


@dataclass(frozen=True)
class SqlTargetSettings:
    """Where and how to apply. Picklable (it travels to the executors).

    ``url``: ``postgresql://user:pw@host:port/db`` or ``mysql://user:pw@host:port/db``
    (``mariadb://`` too). ``tables``: source table (``schema.table``, ``db.table``) -> target
    table (``schema.table`` or ``table``: the connection's schema/database); unmapped tables go
    to the same name. ``modes``: the capturing connector's value settings (:class:`Modes`, or
    its config dict). ``batch_size``: rows per multi-row statement.

    PostgreSQL only: a segment's group of at least ``copy_min_rows`` rows (deletes, or upserts
    writing one column set) goes by COPY into a temporary staging table, then one set-based
    statement (PeerDB's method); smaller groups go by multi-row statements, which cost less
    below it (``bench/sql_target_write.py``'s sweep on a busy 2-core machine: statements ahead
    up to 250-row segments, either ahead at 500, COPY ahead from 1000 on in every run).
    ``None``: statements only. ``segment_rows``: at most this many rows per segment where COPY
    is used (past a few thousand COPY gains little, and a segment's rows held longer make
    Python's garbage collector scan more).

    ``max_retries`` / ``retry_delay_s`` (Debezium's JDBC sink: ``flush.max.retries``,
    ``flush.retry.delay.ms``): a call whose transaction the target refused for a reason that
    passes (a deadlock between two lanes, a serialization failure) runs again, up to this many
    times, waiting the delay times the attempt's number before each.
    """

    url: str
    tables: Mapping[str, str] = field(default_factory=dict)
    modes: Modes = field(default_factory=Modes)
    batch_size: int = 1000
    add_position_column: bool = True
    copy_min_rows: int | None = 1000
    segment_rows: int = 10_000
    max_retries: int = 5
    retry_delay_s: float = 1.0
    #: What a schema change does (``schema_policy.py``): evolve, lenient, ignore or exception.
    schema_change_policy: str = "lenient"
    #: Source table -> the target columns its newest schema lacks (``evolution.Evolved``):
    #: ``evolve`` writes NULL into them. A table not here: every target column a change lacks.
    dropped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The batch's schema ids (``frames.SCHEMA_KEY``) -> column -> how its values are encoded in
    #: that schema (``table_schemas.encodings``): a row decodes by its own schema's scale.
    encodings: Mapping[str, Mapping[str, tuple[str, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.modes, Mapping):
            object.__setattr__(self, "modes", Modes.from_config(self.modes))
        object.__setattr__(self, "tables", dict(self.tables))
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size}")
        if self.copy_min_rows is not None and self.copy_min_rows < 1:
            raise ValueError(f"copy_min_rows must be at least 1 (or None: no COPY), not {self.copy_min_rows}")
        if self.segment_rows < 1:
            raise ValueError(f"segment_rows must be at least 1, not {self.segment_rows}")
        if self.max_retries < 0 or self.retry_delay_s < 0:
            raise ValueError(
                f"max_retries and retry_delay_s must not be negative ({self.max_retries}, {self.retry_delay_s})"
            )

    @classmethod
    def of(cls, value: SqlTargetSettings | Mapping[str, Any]) -> SqlTargetSettings:
        if isinstance(value, SqlTargetSettings):
            return value
        return cls(**value)

    def __repr__(self) -> str:  # never the password
        return (
            f"SqlTargetSettings(url={safe_url(self.url)!r}, tables={self.tables!r}, modes={self.modes!r}, "
            f"batch_size={self.batch_size}, add_position_column={self.add_position_column}, "
            f"copy_min_rows={self.copy_min_rows}, segment_rows={self.segment_rows}, max_retries={self.max_retries}, "
            f"retry_delay_s={self.retry_delay_s}, schema_change_policy={self.schema_change_policy!r})"
        )


def safe_url(url: str) -> str:
    return re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", url)
