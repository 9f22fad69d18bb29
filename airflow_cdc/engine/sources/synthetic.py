"""A synthetic source: deterministic change events at a configurable rate.

Event number ``n`` of a task is a pure function of (task, n), so a restarted engine regenerates
exactly the events after its committed offset - which is what crash tests need to prove that
nothing is lost. Each task owns one partition ``{"server": <topic.prefix>, "task": <i>}`` and its
offset is ``{"seq": n}``, meaning events ``0..n`` are done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.config import Config, ConfigDef, Field
from airflow_cdc.engine.connector import SourceConnector, SourceTask, TaskContext
from airflow_cdc.engine.envelope import Op, change_value, source_builder
from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.positions import Phase, PositionCodec, SourcePosition
from airflow_cdc.engine.records import Offset, SourceRecord

CONNECTOR = "synthetic"

#: Per key, the operations repeat as insert, update, update, delete.
_CYCLE = (Op.CREATE, Op.UPDATE, Op.UPDATE, Op.DELETE)


class SequencePositions(PositionCodec):
    """Positions are event numbers: ``"99"`` is ``{"seq": 99}``, events 0..99 done."""

    example = "an event number like 99"
    lag_unit = "events"

    def parse(self, text: str) -> Offset:
        if not text.strip().isdigit():
            raise OffsetError(f"{text!r} is not {self.example}")
        return {"seq": int(text)}

    def format(self, offset: Offset) -> str:
        return str(offset.get("seq"))

    def compare(self, a: Offset, b: Offset) -> int:
        return int(a.get("seq") or 0) - int(b.get("seq") or 0)

    def lag(self, committed: Offset, current: Offset) -> int:
        return max(0, self.compare(current, committed))


class SyntheticConnector(SourceConnector):
    positions = SequencePositions()
    config_def = ConfigDef(
        [
            Field("topic.prefix", default="synthetic", doc="Logical server name; the topics' prefix."),
            Field(
                "synthetic.tables",
                type="list",
                default=["inventory.customers"],
                doc="Tables (schema.table) the events are spread over.",
            ),
            Field("synthetic.keys", type="int", default=1000, minimum=1, doc="Distinct primary keys per table."),
            Field("synthetic.rate", type="int", default=0, minimum=0, doc="Events per second per task; 0 = unlimited."),
            Field(
                "synthetic.max.events",
                type="int",
                default=-1,
                minimum=-1,
                doc="Events per task before the source goes idle; -1 = endless.",
            ),
            Field("max.batch.size", type="int", default=2048, minimum=1, doc="Most events per poll."),
            Field("poll.interval.ms", type="int", default=500, minimum=0, doc="Idle wait per poll."),
        ]
    )

    def task_class(self) -> type[SourceTask]:
        return SyntheticTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [self.config.with_(**{"synthetic.task": index}) for index in range(max_tasks)]


class SyntheticTask(SourceTask):
    def start(self, context: TaskContext) -> None:
        settings = SyntheticConnector.config_def.validate(context.config)
        self.prefix: str = settings["topic.prefix"]
        self.tables: list[str] = settings["synthetic.tables"]
        self.keys: int = settings["synthetic.keys"]
        self.rate: int = settings["synthetic.rate"]
        self.max_events: int = settings["synthetic.max.events"]
        self.batch_size: int = settings["max.batch.size"]
        self.idle_s: float = settings["poll.interval.ms"] / 1000
        self.task = int(context.config.get("synthetic.task", 0))
        self.partition: dict[str, Any] = {"server": self.prefix, "task": self.task}
        committed = context.offset(self.partition)
        self.next_seq = 0 if committed is None else int(committed["seq"]) + 1  # type: ignore[arg-type]
        self.first_seq = self.next_seq
        self._started_at = time.monotonic()
        self._idle = threading.Event()  # never set: only a way to wait without sleep()
        self.committed: Offset | None = committed

    def poll(self) -> list[SourceRecord]:
        count = self.batch_size
        if self.max_events >= 0:
            count = min(count, self.max_events - self.next_seq)
        if self.rate:
            allowed = int((time.monotonic() - self._started_at) * self.rate) - (self.next_seq - self.first_seq)
            count = min(count, allowed)
        if count <= 0:
            self._idle.wait(min(self.idle_s, 0.05) if self.rate else self.idle_s)
            return []
        records = [self.record(seq) for seq in range(self.next_seq, self.next_seq + count)]
        self.next_seq += count
        return records

    def record(self, seq: int) -> SourceRecord:
        return make_record(self.prefix, self.tables, self.keys, self.task, self.partition, seq)

    def commit(self, offsets: Mapping[str, Offset]) -> None:
        for offset in offsets.values():
            self.committed = offset

    def stop(self) -> None:
        pass

    def position(self) -> SourcePosition:
        newest = getattr(self, "next_seq", 0) - 1
        return SourcePosition(
            Phase.STREAMING, getattr(self, "partition", None), {"seq": newest} if newest >= 0 else None
        )


#: The synthetic connector's ``source`` block (envelope.py holds the shape).
_source_block = source_builder(CONNECTOR, ("schema", "table", "seq"))


def make_record(
    prefix: str, tables: list[str], keys: int, task: int, partition: Mapping[str, Any], seq: int
) -> SourceRecord:
    """Event ``seq`` of ``task``: a pure function, so a replay regenerates the same event."""
    table = tables[seq % len(tables)]
    schema, _, name = table.rpartition(".")
    round_, key_index = divmod(seq // len(tables), keys)
    op = _CYCLE[round_ % len(_CYCLE)]
    key = {"id": key_index}
    row = {"id": key_index, "name": f"customer-{key_index}", "version": round_, "task": task, "seq": seq}
    before = None if op is Op.CREATE else {**row, "version": round_ - 1}
    after = None if op is Op.DELETE else row
    ts_ns = time.time_ns()
    source = _source_block(prefix, ts_ns, "false", "synthetic", None, schema or None, name, seq)
    value = change_value(op.value, before, after, source, None, ts_ns)
    return SourceRecord(
        topic=f"{prefix}.{table}",
        key=key,
        value=value,
        partition=partition,
        offset={"seq": seq},
        timestamp_ms=ts_ns // 1_000_000,
    )
