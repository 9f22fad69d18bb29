"""Positions in a source's log as users write them, and how offsets compare: one interface per
connector (``SourceConnector.positions``), so the offset commands, the instance status and the
Airflow sensors never branch on the database kind.

A codec turns a user's position into the offset that resumes right after it (``parse``), prints
an offset the way users write positions (``format``), and orders two offsets (``compare``).
Orders may be partial: a MySQL GTID set is "after" another only if it contains it, so
``compare`` may answer None (neither contains the other), and ``reached`` is then False. A
binlog ``file:pos`` compares by file sequence number, then position; PostgreSQL's LSNs are
totally ordered (``sources/postgres/positions.py``).

The *current* position of a source is the newest one it has seen in its log (PostgreSQL: the
WAL end the server reports), as an offset of the same codec: ``caught_up`` says whether
everything up to it is committed, ``lag`` how far behind the committed offset is, in the
codec's ``lag_unit``.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.records import Offset, Partition


class PositionCodec(abc.ABC):
    #: How positions of this source look, for error messages: "an LSN like 0/16B3748".
    example: ClassVar[str] = "an offset as JSON"
    #: What ``lag`` counts ("bytes", "events", "transactions"); empty when it cannot tell.
    lag_unit: ClassVar[str] = ""

    @abc.abstractmethod
    def parse(self, text: str) -> Offset:
        """The offset that makes the source resume right after ``text``; OffsetError (with
        :attr:`example`) when ``text`` is not a position of this source."""

    @abc.abstractmethod
    def format(self, offset: Offset) -> str:
        """The position ``offset`` stands at, as users write it (what ``parse`` reads)."""

    @abc.abstractmethod
    def compare(self, a: Offset, b: Offset) -> int | None:
        """Negative if ``a`` is before ``b``, 0 at the same position, positive after; None when
        they are not ordered (GTID sets neither of which contains the other)."""

    def lag(self, committed: Offset, current: Offset) -> int | None:
        """How far ``committed`` is behind ``current``, in :attr:`lag_unit`; None if unknown."""
        return None

    def reached(self, offset: Offset, target: Offset) -> bool:
        """Everything up to ``target`` is covered by ``offset``."""
        order = self.compare(offset, target)
        return order is not None and order >= 0

    def caught_up(self, committed: Offset, current: Offset) -> bool:
        """The committed offset covers the newest position the source has seen."""
        return self.reached(committed, current)


class OpaquePositions(PositionCodec):
    """For sources without a codec of their own: positions are offsets written as JSON, equal
    or not ordered at all."""

    def parse(self, text: str) -> Offset:
        try:
            offset = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(f"{text!r} is not {self.example}: {exc}") from None
        if not isinstance(offset, dict):
            raise OffsetError(f"{text!r} is not {self.example} (a JSON object)")
        return offset

    def format(self, offset: Offset) -> str:
        return orjson.dumps(offset, option=orjson.OPT_SORT_KEYS).decode()

    def compare(self, a: Offset, b: Offset) -> int | None:
        return 0 if dict(a) == dict(b) else None


OPAQUE_POSITIONS = OpaquePositions()


class Phase(enum.StrEnum):
    """What a task is doing, for status and sensors; the same words for every source."""

    STARTING = "starting"
    #: Reading a snapshot of the tables (initial or blocking); the log waits.
    SNAPSHOTTING = "snapshotting"
    #: Reading the log (an incremental snapshot may run meanwhile).
    STREAMING = "streaming"
    #: Nothing more to read (``snapshot.mode=initial_only`` after its snapshot).
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"


#: The least advanced phase comes first: an instance is as far as its slowest task.
PHASE_ORDER = (Phase.FAILED, Phase.STARTING, Phase.SNAPSHOTTING, Phase.STREAMING, Phase.FINISHED, Phase.STOPPED)


@dataclass(frozen=True)
class SourcePosition:
    """What a task reports of itself (``SourceTask.position()``): its phase, the partition it
    owns, and the newest position it has seen in the source's log, as an offset of the
    connector's codec (None while unknown, e.g. during a snapshot)."""

    phase: Phase
    partition: Partition | None = None
    current: Offset | None = None


def codec_for(props: Mapping[str, Any]) -> PositionCodec:
    """The position codec of the connector that ``connector.class`` names."""
    # Imported here: connector.py imports this module for SourceConnector.positions.
    from airflow_cdc.engine.connector import load_connector_class

    name = str(props.get("connector.class") or "")
    try:
        cls = load_connector_class(name)
    except ValueError as exc:
        raise OffsetError(f"connector.class {name!r}: {exc}") from None
    positions: PositionCodec = cls.positions
    return positions
