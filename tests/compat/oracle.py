"""The Debezium compatibility oracle: the same database captured by Debezium's connector (on the
Kafka Connect fixture, JSON converter, schemas disabled) and by our engine (its Kafka sink), with
the same configuration keys, into the same broker; then both topic sets are compared event by
event.

What may differ, and why (everything else is a difference the test reports):

* ``ts_ms``/``ts_us``/``ts_ns`` of the envelope: when each side processed the event.
* ``source.version``: each side's own version; ``source.name``: the ``topic.prefix``, which the
  test makes different so that both sides can write to one broker.
* In snapshot events (``op=r``), the values of ``source.ts_*`` and of the source's position
  fields (PostgreSQL: ``lsn``, ``txId`` and ``sequence``; MySQL/MariaDB: see
  ``MARIADB_RULES``): each side takes its own snapshot, at its own moment and position. Their
  shape is compared: which are null or empty, and that ``sequence`` is ``[null,"<lsn>"]``.

With ``provide.transaction.metadata`` the transaction topic (``TRANSACTION_TOPIC``) is compared
in order like a streamed topic, whole (its ``ts_ms`` is the source's commit time, not a
processing time), and so is each change event's ``transaction`` block. One allowance: Debezium
names the data collection of a transactional logical decoding message (PostgreSQL) by a new
object's ``Object.toString()`` per message (``...LogicalDecodingMessageId@<identity hash>``), a
name no one can reproduce and whose hash places it anywhere in ``data_collections``; ours is
``LOGICAL_DECODING_MESSAGE@<lsn>``. Both are masked to one name and such an END's
``data_collections`` compared as a set (``_masked_transaction``).

The schema change topic (MySQL/MariaDB ``include.schema.changes``, ``SCHEMA_TOPIC``) is compared
in order like a streamed topic; its snapshot events (``source.snapshot`` "true", no ``op``) by
the same rules as snapshot rows. Not exercised, on purpose: DDL of tables or databases the
capture leaves out, and statements that change no table (GRANT ...): Debezium's defaults emit
them, we do not (schema_events.py says why).

Snapshot events are compared per table as a set (by key; a keyless table's by its row);
streamed events in topic order, which for one partition is the log order both sides decode.
What differs per source (the position fields, the allowances) is a ``Rules``.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition

#: The schema change topic (``include.schema.changes``), named ``topic.prefix`` itself.
SCHEMA_TOPIC = "<topic.prefix>"
#: The transaction topic (``provide.transaction.metadata``), ``topic.transaction``'s default.
TRANSACTION_TOPIC = "transaction"
#: The data collection of a transactional logical decoding message: Debezium's, then ours.
_MESSAGE_COLLECTION = re.compile(
    r"^(io\.debezium\.connector\.postgresql\.LogicalDecodingMessageMonitor\$LogicalDecodingMessageId@[0-9a-f]+"
    r"|LOGICAL_DECODING_MESSAGE@\d+)$"
)
ENVELOPE_VOLATILE = ("ts_ms", "ts_us", "ts_ns")
SOURCE_ALWAYS_VOLATILE = ("version", "name")
SOURCE_SNAPSHOT_VOLATILE = ("ts_ms", "ts_us", "ts_ns")
#: Compared by shape in snapshot events: their values differ between two snapshots.
SOURCE_SNAPSHOT_POSITIONS = ("lsn", "txId", "sequence")


@dataclass(frozen=True)
class Allowance:
    """A value we emit on purpose where Debezium loses it (the README lists them): the field
    ``path`` (fnmatch pattern, e.g. ``after.a2``) of ``topic``'s events (``topic`` an fnmatch
    pattern too, e.g. ``*.customers`` where the database's name is the test's own) whose op is
    in ``ops``."""

    topic: str
    path: str
    ops: str
    reason: str
    #: When given, the allowance covers only the loss it names: Debezium's value must be exactly
    #: this function of ours (anything else is still a difference).
    debezium_of: Callable[[Any], Any] | None = None

    def covers(self, topic: str, op: str | None, path: str, theirs: Any = None, ours: Any = None) -> bool:
        if not (
            fnmatch.fnmatchcase(topic, self.topic) and (op or "") in self.ops and fnmatch.fnmatchcase(path, self.path)
        ):
            return False
        return self.debezium_of is None or theirs == self.debezium_of(ours)


ALLOWED_DIFFERENCES = (
    Allowance(
        "public.arrays",
        "*.a2",
        "rcud",
        "multi-dimensional arrays: Debezium emits one null per sub-array ([null, null]); we emit the nested lists",
    ),
    Allowance(
        "public.arrays",
        "*.ad",
        "rcud",
        "BC dates in date[]: Debezium drops the era (0044-03-15 BC becomes 44 AD, -703383); we emit the "
        "proleptic day (-735160), as its streaming does for a date column",
    ),
    Allowance(
        "public.temporal",
        "*.d",
        "r",
        "BC dates in snapshots: Debezium's snapshot (pgjdbc's java.sql.Date) drops the era (-703383 for "
        "0044-03-15 BC); we emit the proleptic day (-735160), as its streaming does",
    ),
    Allowance(
        "public.texts",
        "*.nm",
        "cud",
        "name columns while streaming: Debezium's pgoutput value resolver has no case for name and emits "
        "null (unless include.unknown.datatypes); we emit the value, as its snapshot does",
    ),
)


#: Logical decoding messages our engine writes for itself (heartbeats, read-only watermarks).
#: Debezium, reading the same WAL, emits them as op=m events like any message; we never emit
#: our own bookkeeping (every other prefix is emitted, as Debezium does).
OUR_MESSAGE_PREFIXES = ("airflow-cdc-heartbeat", "airflow-cdc-watermark")


def _ours_bookkeeping(event: Event) -> bool:
    return event.topic == "message" and isinstance(event.key, dict) and event.key.get("prefix") in OUR_MESSAGE_PREFIXES


def _nothing_left_out(event: Event) -> bool:
    return False


@dataclass(frozen=True)
class Rules:
    """What one source's comparison ignores: the snapshot position fields compared by shape,
    the deliberate deviations, and which of Debezium's records we leave out on purpose."""

    snapshot_positions: tuple[str, ...]
    allowances: tuple[Allowance, ...]
    left_out: Callable[[Event], bool] = _nothing_left_out


#: MySQL/MariaDB snapshot events: ``file``/``pos`` name the binlog point each side's snapshot
#: stands at, ``gtid`` the transaction an event belongs to; two snapshots of one database
#: (Debezium's and ours, each its own consistent-snapshot transaction, taken at its own moment)
#: stand at different points when anything else writes to the shared server's binlog. ``row``
#: and ``thread`` are compared as they are.
MARIADB_SNAPSHOT_POSITIONS = ("file", "pos", "gtid")


def _java_cp1252(text: Any) -> Any:
    """What Debezium's binlog reader makes of a latin1 value: its bytes (MariaDB's latin1, which
    keeps cp1252's five undefined bytes as U+0081, U+008D, U+008F, U+0090, U+009D) decoded by
    Java's Cp1252, which replaces each undefined byte with U+FFFD."""
    if not isinstance(text, str):
        return text
    from airflow_cdc.engine.sources.mysql.binlog_values import MYSQL_LATIN1

    return text.encode(MYSQL_LATIN1).decode("cp1252", errors="replace")


#: Where our MariaDB events differ from Debezium's on purpose (the README lists them).
MARIADB_ALLOWED_DIFFERENCES: tuple[Allowance, ...] = (
    Allowance(
        "*.customers",
        "*.note",
        "cud",
        "latin1 bytes 0x81, 0x8D, 0x8F, 0x90, 0x9D streamed: Debezium decodes latin1 as Java's Cp1252 and emits "
        "U+FFFD for each (the byte is lost); we emit the character the server stores (U+0081...), as Debezium's "
        "snapshot does (the server converts them so)",
        _java_cp1252,
    ),
)


def _keyless_tombstone(event: Event) -> bool:
    """Debezium's tombstone after a delete in a table without primary key: a record with a null
    key and a null value. Ours has none: a Kafka client refuses a record with neither
    (kafka-python: "Need at least one: key or value"; our sink stalled on it), and a tombstone
    without a key deletes nothing on compaction (a compacted topic refuses null keys anyway)."""
    return event.key is None and event.value is None


POSTGRES_RULES = Rules(SOURCE_SNAPSHOT_POSITIONS, ALLOWED_DIFFERENCES, _keyless_tombstone)
MARIADB_RULES = Rules(MARIADB_SNAPSHOT_POSITIONS, MARIADB_ALLOWED_DIFFERENCES, _keyless_tombstone)


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
        if self.value is None:
            return None
        # With schemas enabled the envelope is the payload of {"schema", "payload"}.
        envelope = self.value["payload"] if set(self.value) == {"schema", "payload"} else self.value
        return envelope.get("op") if isinstance(envelope, dict) else None


def read_topics(bootstrap: str, prefix: str, timeout: float = 60.0) -> dict[str, list[Event]]:
    """Every record of every ``<prefix>.*`` topic, from the beginning to the end offsets as of
    now, by topic (prefix removed) in partition order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        topics = sorted(t for t in consumer.topics() if t.startswith(prefix + ".") or t == prefix)
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        events: dict[str, list[Event]] = {_name(t, prefix): [] for t in topics}
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
                        events[_name(tp.topic, prefix)].append(_event(_name(tp.topic, prefix), message))
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read the {prefix}.* topics to their ends in {timeout:.0f}s")
        return events
    finally:
        consumer.close()


def _name(topic: str, prefix: str) -> str:
    """A topic's name without the prefix; the schema change topic (the prefix itself) is
    ``SCHEMA_TOPIC``."""
    return SCHEMA_TOPIC if topic == prefix else topic[len(prefix) + 1 :]


def _event(topic: str, message: Any) -> Event:
    key = json.loads(message.key) if message.key else None
    value = json.loads(message.value) if message.value else None
    return Event(topic, key, value)


def normalise(value: Mapping[str, Any], positions: tuple[str, ...] = SOURCE_SNAPSHOT_POSITIONS) -> dict[str, Any]:
    """The envelope without the fields that must differ (see the module docstring)."""
    if "status" in value and "source" not in value:
        return dict(value)  # a transaction's BEGIN or END: nothing in it may differ
    out = {k: v for k, v in value.items() if k not in ENVELOPE_VOLATILE}
    # A schema change event (no op) of the snapshot is read at each side's own snapshot, too.
    snapshot = value.get("op") == "r" or ("op" not in value and value.get("source", {}).get("snapshot") == "true")
    volatile = SOURCE_ALWAYS_VOLATILE + (SOURCE_SNAPSHOT_VOLATILE if snapshot else ())
    source = {k: v for k, v in value.get("source", {}).items() if k not in volatile}
    if not snapshot and source.get("snapshot") is None:
        # Debezium leaves source.snapshot unset in streamed events; Connect's JsonConverter writes
        # the field's default, "false", unless replace.null.with.default=false, which the oracle
        # sets so that a NULL column stays NULL. Ours always writes "false", as users see it.
        source["snapshot"] = "false"
    if snapshot:
        lsn = source.get("lsn")
        for name in positions:
            if source.get(name) is not None:
                source[name] = _shape(name, source[name], lsn)
    out["source"] = source
    return out


def _shape(name: str, value: Any, lsn: Any) -> str:
    """``int`` / ``str`` for a position (its value if empty or zero: no position at all); for a
    sequence, which of its halves are null, equal to each other, or equal to ``source.lsn``
    (``[null,lsn]`` for an initial snapshot's events)."""
    if name != "sequence":
        return repr(value) if value in ("", 0) else type(value).__name__
    try:
        first, second = json.loads(value)
    except (ValueError, TypeError):
        return f"unexpected {value!r}"
    head = "null" if first is None else ("lsn" if str(first) == str(lsn) else "n")
    tail = "lsn" if str(second) == str(lsn) else ("n" if second == first else "m")
    return f"[{head},{tail}]"


def _describe(event: Event) -> str:
    return f"{event.topic} key={json.dumps(event.key, sort_keys=True)} op={event.op}"


def _value_differences(
    where: str,
    theirs: Any,
    ours: Any,
    path: str = "",
    allowed: Callable[[str, Any, Any], bool] = lambda path, theirs, ours: False,
) -> Iterable[str]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for name in sorted(set(theirs) | set(ours), key=str):
            sub = f"{path}.{name}" if path else str(name)
            if allowed(sub, theirs.get(name), ours.get(name)):
                continue
            if name not in ours:
                yield f"{where}: {sub} missing in ours (debezium: {theirs[name]!r})"
            elif name not in theirs:
                yield f"{where}: {sub} not in debezium's (ours: {ours[name]!r})"
            else:
                yield from _value_differences(where, theirs[name], ours[name], sub, allowed)
    elif theirs != ours or type(theirs) is not type(ours):
        yield f"{where}: {path}: debezium {theirs!r} != ours {ours!r}"


def _compare_event(theirs: Event, ours: Event, rules: Rules = POSTGRES_RULES) -> list[str]:
    where = _describe(theirs)
    if theirs.key != ours.key:
        return [f"{where}: key debezium {theirs.key!r} != ours {ours.key!r}"]
    if theirs.value is None or ours.value is None:
        return [] if theirs.value is ours.value else [f"{where}: tombstone on one side only (ours: {ours.value})"]
    op = theirs.op

    def allowed(path: str, their_value: Any, our_value: Any) -> bool:
        return any(a.covers(theirs.topic, op, path, their_value, our_value) for a in rules.allowances)

    positions = rules.snapshot_positions
    return list(
        _value_differences(where, normalise(theirs.value, positions), normalise(ours.value, positions), "", allowed)
    )


def _key(event: Event) -> str:
    return json.dumps(event.key, sort_keys=True)


def _snapshot_by_key(events: list[Event]) -> dict[str, Event]:
    """Snapshot events by key. A keyless table's (null keys) are numbered in the order of their
    rows (``null#1``, ...), so that both sides' rows pair up and are compared field by field."""
    snapshot = [e for e in events if e.op == "r"]
    out = {_key(e): e for e in snapshot if e.key is not None}
    keyless = sorted((e for e in snapshot if e.key is None), key=lambda e: json.dumps(e.value["after"], sort_keys=True))
    out.update((f"null#{n}", e) for n, e in enumerate(keyless, 1))
    return out


def compare_topic(topic: str, theirs: list[Event], ours: list[Event], rules: Rules = POSTGRES_RULES) -> list[str]:
    """Differences between Debezium's events and ours for one topic."""
    problems: list[str] = []
    their_snapshot = _snapshot_by_key(theirs)
    our_snapshot = _snapshot_by_key(ours)
    for key in sorted(set(their_snapshot) | set(our_snapshot)):
        if key not in our_snapshot:
            problems.append(f"{topic} key={key} op=r: missing in ours")
        elif key not in their_snapshot:
            problems.append(f"{topic} key={key} op=r: not in debezium's")
        else:
            problems += _compare_event(their_snapshot[key], our_snapshot[key], rules)
    their_stream = [e for e in theirs if e.op != "r"]
    our_stream = [e for e in ours if e.op != "r"]
    for index, (a, b) in enumerate(zip(their_stream, our_stream, strict=False)):
        if (a.op, _key(a)) != (b.op, _key(b)):
            problems.append(
                f"{topic}: streamed event {index} is {a.op} {_key(a)} in debezium's, {b.op} {_key(b)} in ours;"
                f" debezium {[(e.op, _key(e)) for e in their_stream]}, ours {[(e.op, _key(e)) for e in our_stream]}"
            )
            break
        problems += _compare_event(a, b, rules)
    if len(their_stream) != len(our_stream):
        problems.append(f"{topic}: {len(their_stream)} streamed events in debezium's, {len(our_stream)} in ours")
    return problems


_WINDOW_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-(open|close)$")
_INSTANT = re.compile(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"')


def _masked_row(row: Any) -> Any:
    """A signal-table row with a watermark's random parts masked: its id's UUID and the
    instants in its metadata (both sides write watermarks with ids and times of their own)."""
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        return row
    match = _WINDOW_ID.match(row["id"])
    if not match:
        return row
    data = row.get("data")
    masked_data = _INSTANT.sub('"<instant>"', data) if isinstance(data, str) else data
    return {**row, "id": f"<window>-{match.group(1)}", "data": masked_data}


def _masked(event: Event) -> Event:
    if event.value is None:
        return Event(event.topic, _masked_row(event.key), None)
    value = {
        **event.value,
        "before": _masked_row(event.value.get("before")),
        "after": _masked_row(event.value.get("after")),
    }
    return Event(event.topic, _masked_row(event.key), value)


def _masked_transaction(event: Event) -> Event:
    """An END whose ``data_collections`` name logical decoding messages: those names masked and
    the list sorted (see the module docstring); any other event as it is."""
    value = event.value
    if event.topic != TRANSACTION_TOPIC or not value or not value.get("data_collections"):
        return event
    collections = value["data_collections"]
    if not any(_MESSAGE_COLLECTION.match(str(c.get("data_collection"))) for c in collections):
        return event
    masked = [
        {**c, "data_collection": "<message>"} if _MESSAGE_COLLECTION.match(str(c.get("data_collection"))) else c
        for c in collections
    ]
    masked.sort(key=lambda c: json.dumps(c, sort_keys=True))
    return Event(event.topic, event.key, {**value, "data_collections": masked})


def compare(
    theirs: Mapping[str, list[Event]], ours: Mapping[str, list[Event]], rules: Rules = POSTGRES_RULES
) -> list[str]:
    """Every difference between two captures, topic by topic (watermark rows masked)."""
    theirs = {
        topic: [_masked_transaction(_masked(e)) for e in events if not _ours_bookkeeping(e) and not rules.left_out(e)]
        for topic, events in theirs.items()
    }
    theirs = {topic: events for topic, events in theirs.items() if events}
    ours = {topic: [_masked_transaction(_masked(e)) for e in events] for topic, events in ours.items()}
    problems = []
    for topic in sorted(set(theirs) | set(ours)):
        if topic not in ours:
            problems.append(f"{topic}: topic only in debezium's ({len(theirs[topic])} events)")
        elif topic not in theirs:
            problems.append(f"{topic}: topic only in ours ({len(ours[topic])} events)")
        else:
            problems += compare_topic(topic, theirs[topic], ours[topic], rules)
    return problems


def summary(problems: list[str], limit: int = 60) -> str:
    """The differences, grouped by what differs (topic, op and field, whatever the key), for a
    readable failure."""
    by_field: dict[str, list[str]] = defaultdict(list)
    for problem in problems:
        where, _, what = problem.partition(": ")
        topic, _, rest = where.partition(" key=")
        op = rest.rpartition(" op=")[2] if rest else ""
        by_field[f"{topic} {op} {what.split(':')[0]}"].append(problem)
    lines = [f"{len(problems)} difference(s) from Debezium:"]
    for same in list(by_field.values())[:limit]:
        lines.append(f"  {same[0]}" + (f"  (+{len(same) - 1} more like it)" if len(same) > 1 else ""))
    return "\n".join(lines)
