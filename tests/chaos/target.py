"""The target: the captured events, read as a consumer reads them and replayed into one image per
table, with every repeated event counted.

Replaying follows Debezium's contract for consumers: ``c``/``r``/``u`` set the row to ``after``
(a column holding the unavailable-value placeholder - an unchanged TOASTed value - keeps what the
row had), ``d`` removes it, ``t`` empties the table, a tombstone and the signal table's rows
change nothing. A repeat is an event whose identity - table, source position, key, op - was
replayed before; snapshot reads (``r``) have no position and are told apart by table, key and
snapshot (the initial one, an incremental one).

Readers: :class:`ChangelogReader` takes each published segment once (segments are immutable
once renamed into place); :class:`KafkaReader` reads every partition of the prefix's topics from
the start.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.chaos.workload import TABLES

PLACEHOLDER = "__debezium_unavailable_value"


class Replay:
    def __init__(self) -> None:
        self.tables: dict[str, dict[str, dict[str, Any]]] = {table: {} for table in TABLES}
        self.seen: set[tuple[Any, ...]] = set()
        self.repeated: Counter[str] = Counter()  # "changes" and "reads"
        self.events = 0
        self.reads = 0
        #: Lines a reader could not parse: a published segment must never hold one.
        self.broken: list[str] = []

    def apply(self, event: dict[str, Any]) -> None:
        value = event.get("value")
        if value is None:
            return  # a tombstone
        source = value.get("source") or {}
        table = source.get("table")
        if table not in self.tables:
            return  # the signal table, a schema change, a heartbeat
        self.events += 1
        op, key = value["op"], json.dumps(event.get("key"), sort_keys=True)
        self._count(table, source, key, op)
        rows = self.tables[table]
        if op == "t":
            rows.clear()
        elif op == "d":
            rows.pop(key, None)
        else:
            after = dict(value["after"])
            old = rows.get(key, {})
            for column, field in after.items():
                if field == PLACEHOLDER:
                    after[column] = old.get(column, PLACEHOLDER)
            rows[key] = after

    def _count(self, table: str, source: dict[str, Any], key: str, op: str) -> None:
        if op == "r":
            # A row read again by the same snapshot; an incremental snapshot reads every row the
            # initial one read once more, by design.
            self.reads += 1
            kind = "incremental" if source.get("snapshot") == "incremental" else "initial"
            identity: tuple[Any, ...] = (table, key, "r", kind)
        else:
            where = tuple(source.get(name) for name in ("lsn", "file", "pos", "row"))
            identity = (table, *where, key, op)
        if identity in self.seen:
            self.repeated["reads" if op == "r" else "changes"] += 1
        else:
            self.seen.add(identity)


class ChangelogReader:
    """New published segments of every topic under the changelog directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._done: dict[Path, tuple[int, int]] = {}  # what was read: (inode, size)

    def read(self, replay: Replay) -> int:
        count = 0
        if not self.root.exists():
            return 0
        for topic in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for segment in sorted(topic.glob("*.jsonl")):
                if segment in self._done:
                    continue
                data = segment.read_bytes()
                self._done[segment] = (segment.stat().st_ino, len(data))
                for number, line in enumerate(data.splitlines(), 1):
                    try:
                        event = json.loads(line)
                    except ValueError:
                        replay.broken.append(f"{segment}:{number}: {line[:80]!r}")
                        continue
                    replay.apply(event)
                    count += 1
        return count

    def replaced(self) -> list[str]:
        """Segments that changed after they were read (published segments must not)."""
        changed = []
        for path, (inode, size) in self._done.items():
            try:
                now = path.stat()
            except FileNotFoundError:
                continue
            if (now.st_ino, now.st_size) != (inode, size):
                changed.append(f"{path.parent.name}/{path.name}: {size} bytes when read, {now.st_size} now")
        return changed


class KafkaReader:
    """Every topic of ``prefix`` from its first offset, one consumer, no group."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from kafka import KafkaConsumer

        self.prefix = prefix
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000)
        self._assigned: set[Any] = set()

    def _assign(self) -> None:
        from kafka import TopicPartition

        topics = [t for t in self.consumer.topics() if t.startswith(f"{self.prefix}.")]
        wanted = set(self._assigned)
        for topic in topics:
            for partition in self.consumer.partitions_for_topic(topic) or ():
                wanted.add(TopicPartition(topic, partition))
        new = wanted - self._assigned
        if new:
            self.consumer.assign(sorted(wanted))
            self.consumer.seek_to_beginning(*new)
            self._assigned = wanted

    def read(self, replay: Replay) -> int:
        self._assign()
        count = 0
        while True:
            polled = self.consumer.poll(timeout_ms=300)
            if not polled:
                return count
            for messages in polled.values():
                for message in messages:
                    key = None if message.key is None else json.loads(message.key)
                    value = None if message.value is None else json.loads(message.value)
                    replay.apply({"key": key, "value": value})
                    count += 1

    def replaced(self) -> list[str]:
        return []

    def close(self) -> None:
        self.consumer.close()


def diff(expected: dict[str, dict[str, Any]], actual: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Keys missing from the target, extra in it, and with other values."""
    return {
        "missing": [k for k in expected if k not in actual],
        "extra": [k for k in actual if k not in expected],
        "different": [k for k in expected if k in actual and actual[k] != expected[k]],
    }


Image = dict[str, dict[str, dict[str, Any]]]


def differences(source: Image, target: Image) -> tuple[int, str]:
    """How many rows differ (missing, extra or other values) over all tables, and a summary."""
    total, parts = 0, []
    for table in TABLES:
        found = diff(source[table], target[table])
        count = sum(len(keys) for keys in found.values())
        total += count
        if count:
            sample = {kind: keys[:3] for kind, keys in found.items() if keys}
            parts.append(f"{table}: {count} rows {sample}")
    return total, "; ".join(parts)
