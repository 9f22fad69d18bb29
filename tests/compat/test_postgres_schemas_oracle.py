"""PostgreSQL with the JSON converter's schemas enabled (``key.converter.schemas.enable``,
``value.converter.schemas.enable``) and the source-type parameters
(``column.propagate.source.type``, ``datatype.propagate.source.type``): Debezium's connector and
our engine capture the same cases; every event's payload is compared as in
test_postgres_oracle.py, and its key and value schemas whole (ADR 0024).

After the cases, the table ``evolving`` changes under the stream (``ALTER TABLE ... ADD COLUMN
... DEFAULT``, with and without NOT NULL, and ``DROP COLUMN``): each change reaches both sides
as a RELATION message, and the events after it must carry the new schema, as Debezium's do.
Each step waits until every capture has delivered it (a marker row): both sides read the
catalog when the RELATION arrives (nullability, defaults), so a later step committed before an
earlier one was decoded would show each side a different catalog.

The schemas' names start with each side's ``topic.prefix`` (``<prefix>.public.numbers.Key``),
which the oracle makes different so that both sides share one broker: the prefix is masked. A
struct's fields are compared by position and name (``fields.<i>:<name>``) so that a difference
names the field it is in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from tests.compat.oracle import Event, Variant, compare, summary
from tests.compat.test_postgres_oracle import DUMP_ENV_VAR, SNAPSHOT_ROWS, Captured, Captures, dump

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMAS_ON = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
}

VARIANTS = (
    Variant("schemas", SCHEMAS_ON),
    Variant(
        "schemas-propagate",
        {
            **SCHEMAS_ON,
            # By column (schema.table.column) and by type (schema.table.TYPE), as Debezium matches.
            "column.propagate.source.type": r"public\.numbers\..*,public\.texts\.(vc|c|st),.*\.temporal\.ts3",
            "datatype.propagate.source.type": r".+\.TIMESTAMPTZ,.+\.int4,.+\._int4,.+\.bpchar",
            "decimal.handling.mode": "string",
            "time.precision.mode": "connect",
        },
    ),
    # Every column of every type with its source type, length and scale.
    Variant("schemas-propagate-all", {**SCHEMAS_ON, "column.propagate.source.type": ".*"}),
    # Every mode that changes a column's schema, unknown types included as bytes (here strings).
    Variant(
        "schemas-modes",
        {
            **SCHEMAS_ON,
            "decimal.handling.mode": "double",
            "binary.handling.mode": "hex",
            "time.precision.mode": "adaptive_time_microseconds",
            "interval.handling.mode": "string",
            "include.unknown.datatypes": "true",
            "hstore.handling.mode": "map",
        },
    ),
    # The transaction topic's schemas, the transaction block filled in, TRUNCATE events.
    Variant(
        "schemas-transactions", {**SCHEMAS_ON, "provide.transaction.metadata": "true", "skipped.operations": "none"}
    ),
)


EVOLVING = "create table evolving (id int primary key, a text); insert into evolving values (1, 'one')"
#: Each step is one transaction; a marker row after each.
SCHEMA_CHANGES = (
    ["insert into evolving values (2, 'two')"],
    ["alter table evolving add column b int default 5", "insert into evolving (id, a) values (3, 'three')"],
    [
        "alter table evolving add column c varchar(10) not null default 'c'",
        "update evolving set a = 'uno' where id = 1",
    ],
    [
        "alter table evolving drop column a",
        "insert into evolving (id, b) values (4, 40)",
        "delete from evolving where id = 2",
    ],
)


def _marker_count(bootstrap: str, prefix: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(f"{prefix}.public.oracle_marker", 0)
        return int(consumer.end_offsets([tp])[tp]) if tp.topic in consumer.topics() else 0
    finally:
        consumer.close()


def change_schemas(captures: Captures) -> None:
    """The schema changes, one step at a time, each delivered by every capture before the next."""
    for step, statements in enumerate(SCHEMA_CHANGES, start=2):
        with captures.pg_server.connect(captures.database, autocommit=False) as conn:
            for statement in [*statements, f"insert into oracle_marker values ({step})"]:
                conn.execute(statement)
            conn.commit()
        for prefix in captures.all_prefixes():
            wait_until(
                lambda p=prefix, n=step: _marker_count(captures.bootstrap, p) >= n, 120, f"{prefix}'s step {step}"
            )
    for sink in captures.sinks:
        wait_until(lambda s=sink: s.metrics()["in_flight"] == 0, 60, "our sinks acknowledged")


def _masked_schema(schema: Any, prefix: str) -> Any:
    """A Connect schema with ``prefix`` masked in its names and each struct's fields keyed by
    position and name."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for name, value in schema.items():
        if name == "name" and isinstance(value, str) and value.startswith(prefix + "."):
            value = "<prefix>" + value[len(prefix) :]
        elif name == "fields" and isinstance(value, list):
            value = {f"{i}:{f.get('field')}": _masked_schema(f, prefix) for i, f in enumerate(value)}
        elif isinstance(value, dict):
            value = _masked_schema(value, prefix)
        out[name] = value
    return out


def _split(event: Event, prefix: str) -> Event:
    """The event with the payloads as key and value, and both schemas in the value (under
    ``schema.key``/``schema.value``) so that the comparison walks them field by field."""

    def parts(envelope: Any) -> tuple[Any, Any]:
        if isinstance(envelope, dict) and set(envelope) == {"schema", "payload"}:
            return _masked_schema(envelope["schema"], prefix), envelope["payload"]
        return "<no schema>", envelope

    key_schema, key = parts(event.key)
    value_schema, value = parts(event.value)
    if value is None:
        return Event(event.topic, key, None)
    return Event(event.topic, key, {**value, "schema.key": key_schema, "schema.value": value_schema})


def _split_all(events: dict[str, list[Event]], prefix: str) -> dict[str, list[Event]]:
    return {topic: [_split(e, prefix) for e in es] for topic, es in events.items()}


@pytest.fixture(scope="module")
def captured(pg_server: Any, kafka_broker: Any, connect_worker: Any) -> Iterator[Captured]:
    database = pg_server.create_database()
    client = ConnectClient(connect_worker.url)
    captures = Captures(pg_server, database, kafka_broker.bootstrap_servers, client, VARIANTS)
    try:
        captures.prepare()
        with pg_server.connect(database) as conn:
            conn.execute(EVOLVING)
        captures.start()
        captures.stream()
        change_schemas(captures)
        raw = captures.events()
        result = {
            name: tuple(_split_all(side, prefix) for side, prefix in zip(pair, captures.prefixes[name], strict=True))
            for name, pair in raw.items()
        }
        if os.environ.get(DUMP_ENV_VAR):
            dump(raw, os.environ[DUMP_ENV_VAR])
        yield result  # type: ignore[misc]
    finally:
        captures.stop()
        client.close()
        pg_server.drop_database(database)


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_same_events_and_schemas_as_debezium(captured: Captured, variant: str) -> None:
    theirs, ours = captured[variant]
    assert sum(len(events) for events in theirs.values()) > SNAPSHOT_ROWS
    problems = compare(theirs, ours)
    assert not problems, summary(problems)
