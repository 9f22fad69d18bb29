"""The Debezium compatibility oracle: the same database captured by Debezium's connector (on the
Kafka Connect fixture, JSON converter, schemas disabled) and by our engine (its Kafka sink), with
the same configuration keys, into the same broker; then both topic sets are compared event by
event.

What may differ, and why (everything else is a difference the test reports):

* ``ts_ms``/``ts_us``/``ts_ns`` of the envelope: when each side processed the event.
* ``source.version``: each side's own version; ``source.name``: the ``topic.prefix``, which the
  test makes different so that both sides can write to one broker.
* In snapshot events (``op=r``), ``source.ts_*``, ``lsn``, ``txId`` and ``sequence``: each side
  takes its own snapshot, at its own moment and position.

Snapshot events are compared per table as a set (by key); streamed events in topic order, which
for one partition is the WAL order both sides decode.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition

ENVELOPE_VOLATILE = ("ts_ms", "ts_us", "ts_ns")
SOURCE_ALWAYS_VOLATILE = ("version", "name")
SOURCE_SNAPSHOT_VOLATILE = ("ts_ms", "ts_us", "ts_ns", "lsn", "txId", "sequence")


@dataclass(frozen=True)
class Variant:
    """One set of value-handling modes, captured by both sides."""

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    topic: str  # without the topic prefix: "public.numbers"
    key: Any
    value: Any  # None for a tombstone

    @property
    def op(self) -> str | None:
        return None if self.value is None else self.value.get("op")


def read_topics(bootstrap: str, prefix: str, timeout: float = 60.0) -> dict[str, list[Event]]:
    """Every record of every ``<prefix>.*`` topic, from the beginning to the end offsets as of
    now, by topic (prefix removed) in partition order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        topics = sorted(t for t in consumer.topics() if t.startswith(prefix + "."))
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        events: dict[str, list[Event]] = {t[len(prefix) + 1 :]: [] for t in topics}
        if not partitions:
            return events
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for message in batch:
                    if message.offset < ends[tp]:
                        events[tp.topic[len(prefix) + 1 :]].append(_event(tp.topic[len(prefix) + 1 :], message))
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read the {prefix}.* topics to their ends in {timeout:.0f}s")
        return events
    finally:
        consumer.close()


def _event(topic: str, message: Any) -> Event:
    key = json.loads(message.key) if message.key else None
    value = json.loads(message.value) if message.value else None
    return Event(topic, key, value)


def normalise(value: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope without the fields that must differ (see the module docstring)."""
    out = {k: v for k, v in value.items() if k not in ENVELOPE_VOLATILE}
    volatile = SOURCE_ALWAYS_VOLATILE + (SOURCE_SNAPSHOT_VOLATILE if value.get("op") == "r" else ())
    out["source"] = {k: v for k, v in value.get("source", {}).items() if k not in volatile}
    return out


def _describe(event: Event) -> str:
    return f"{event.topic} key={json.dumps(event.key, sort_keys=True)} op={event.op}"


def _value_differences(where: str, theirs: Any, ours: Any, path: str = "") -> Iterable[str]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for name in sorted(set(theirs) | set(ours), key=str):
            sub = f"{path}.{name}" if path else str(name)
            if name not in ours:
                yield f"{where}: {sub} missing in ours (debezium: {theirs[name]!r})"
            elif name not in theirs:
                yield f"{where}: {sub} not in debezium's (ours: {ours[name]!r})"
            else:
                yield from _value_differences(where, theirs[name], ours[name], sub)
    elif theirs != ours or type(theirs) is not type(ours):
        yield f"{where}: {path}: debezium {theirs!r} != ours {ours!r}"


def _compare_event(theirs: Event, ours: Event) -> list[str]:
    where = _describe(theirs)
    if theirs.key != ours.key:
        return [f"{where}: key debezium {theirs.key!r} != ours {ours.key!r}"]
    if theirs.value is None or ours.value is None:
        return [] if theirs.value is ours.value else [f"{where}: tombstone on one side only (ours: {ours.value})"]
    return list(_value_differences(where, normalise(theirs.value), normalise(ours.value)))


def _key(event: Event) -> str:
    return json.dumps(event.key, sort_keys=True)


def compare_topic(topic: str, theirs: list[Event], ours: list[Event]) -> list[str]:
    """Differences between Debezium's events and ours for one topic."""
    problems: list[str] = []
    their_snapshot = {_key(e): e for e in theirs if e.op == "r"}
    our_snapshot = {_key(e): e for e in ours if e.op == "r"}
    for key in sorted(set(their_snapshot) | set(our_snapshot)):
        if key not in our_snapshot:
            problems.append(f"{topic} key={key} op=r: missing in ours")
        elif key not in their_snapshot:
            problems.append(f"{topic} key={key} op=r: not in debezium's")
        else:
            problems += _compare_event(their_snapshot[key], our_snapshot[key])
    their_stream = [e for e in theirs if e.op != "r"]
    our_stream = [e for e in ours if e.op != "r"]
    for index, (a, b) in enumerate(zip(their_stream, our_stream, strict=False)):
        if (a.op, _key(a)) != (b.op, _key(b)):
            problems.append(
                f"{topic}: streamed event {index} is {a.op} {_key(a)} in debezium's, {b.op} {_key(b)} in ours;"
                f" debezium {[(e.op, _key(e)) for e in their_stream]}, ours {[(e.op, _key(e)) for e in our_stream]}"
            )
            break
        problems += _compare_event(a, b)
    if len(their_stream) != len(our_stream):
        problems.append(f"{topic}: {len(their_stream)} streamed events in debezium's, {len(our_stream)} in ours")
    return problems


def compare(theirs: Mapping[str, list[Event]], ours: Mapping[str, list[Event]]) -> list[str]:
    """Every difference between two captures, topic by topic."""
    problems = []
    for topic in sorted(set(theirs) | set(ours)):
        if topic not in ours:
            problems.append(f"{topic}: topic only in debezium's ({len(theirs[topic])} events)")
        elif topic not in theirs:
            problems.append(f"{topic}: topic only in ours ({len(ours[topic])} events)")
        else:
            problems += compare_topic(topic, theirs[topic], ours[topic])
    return problems


def summary(problems: list[str], limit: int = 60) -> str:
    """The differences, grouped by what differs (table.column), for a readable failure."""
    by_field: dict[str, list[str]] = defaultdict(list)
    for problem in problems:
        head = problem.split(": ", 2)
        by_field[head[0].split(" key=")[0] + ": " + (head[1] if len(head) > 2 else "")].append(problem)
    lines = [f"{len(problems)} difference(s) from Debezium:"]
    for problems_of_field in list(by_field.values())[:limit]:
        lines.append("  " + problems_of_field[0] + (f"  (+{len(problems_of_field) - 1} more)" * (len(problems_of_field) > 1)))
    return "\n".join(lines)
