"""PostgreSQL: Debezium's connector and our engine capture the same database, with the same
configuration, for each set of value-handling modes; their events must be the same (ADR 0009).

One database, one publication; every capture has its own slot, created before the first streamed
change, so all of them decode the same WAL. Each side runs once per variant; the captures run
side by side, so the whole module costs one snapshot-and-stream cycle.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.kafka_connect import ConnectClient
from tests.compat import postgres_cases as cases
from tests.compat.oracle import Event, Variant, compare, read_topics, summary

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VARIANTS = (
    Variant("defaults"),
    Variant(
        "string-hex-micro",
        {
            "decimal.handling.mode": "string",
            "binary.handling.mode": "hex",
            "time.precision.mode": "adaptive_time_microseconds",
            "interval.handling.mode": "string",
            "skipped.operations": "none",
        },
    ),
    Variant(
        "double-urlsafe-connect",
        {
            "decimal.handling.mode": "double",
            "binary.handling.mode": "base64-url-safe",
            "time.precision.mode": "connect",
            "tombstones.on.delete": "false",
        },
    ),
    Variant("base64-string-interval", {"binary.handling.mode": "base64", "interval.handling.mode": "string"}),
    Variant(
        "unknown-types-hstore-map",
        {"include.unknown.datatypes": "true", "hstore.handling.mode": "map", "binary.handling.mode": "hex"},
    ),
    # The transaction topic and every event's transaction block; TRUNCATE emitted so it counts.
    Variant("transaction-metadata", {"provide.transaction.metadata": "true", "skipped.operations": "none"}),
)

#: Set to a file path to write both sides' events there as JSON.
DUMP_ENV_VAR = "CDC_ORACLE_DUMP"

#: Rows of every table before capture starts (each statement inserts one).
SNAPSHOT_ROWS = len(cases.snapshot_statements())


def common_config(pg_server: Any, database: str, variant: Variant, prefix: str) -> dict[str, Any]:
    """The keys both sides get, unchanged (they are Debezium's)."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.password": pg_server.password or "unused",
        "database.dbname": database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": prefix,
        "publication.name": "oracle_publication",
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": "initial",
        **variant.settings,
    }


Captured = dict[str, tuple[dict[str, list[Event]], dict[str, list[Event]]]]


class Captures:
    """Both sides of every variant, run over the cases against one database."""

    def __init__(
        self,
        pg_server: Any,
        database: str,
        bootstrap: str,
        connect: ConnectClient,
        variants: tuple[Variant, ...] = VARIANTS,
    ) -> None:
        self.pg_server, self.database, self.bootstrap, self.connect = pg_server, database, bootstrap, connect
        self.variants = variants
        run = uuid.uuid4().hex[:6]
        self.prefixes = {v.name: (f"dbz_{run}_{i}", f"ours_{run}_{i}") for i, v in enumerate(variants)}
        self.sinks: list[KafkaSink] = []
        self.runners: list[EngineRunner] = []

    def prepare(self) -> None:
        with self.pg_server.connect(self.database) as conn:
            for extension in cases.EXTENSIONS:
                conn.execute(f"create extension if not exists {extension}")
            conn.execute(cases.SCHEMA)
            for statement in cases.snapshot_statements():
                conn.execute(statement)
            conn.execute("create publication oracle_publication for all tables")

    def start(self) -> None:
        for variant in self.variants:
            theirs, ours = self.prefixes[variant.name]
            config = common_config(self.pg_server, self.database, variant, theirs)
            # Connect's JsonConverter writes a column's default in place of a NULL unless told not
            # to (KIP-581); a NULL is a NULL in Debezium's event, and in ours.
            converter = {
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "value.converter.replace.null.with.default": "false",
            }
            # A variant's own converter settings (``*.converter.schemas.enable``) win.
            self.connect.create(theirs, {**converter, **config, "tasks.max": 1})
            self._start_ours(variant, ours)
        for variant in self.variants:
            self.connect.wait_running(self.prefixes[variant.name][0], timeout=120)
        for prefix in self.all_prefixes():
            wait_until(lambda p=prefix: self.count(p, "r") >= SNAPSHOT_ROWS, 180, f"{prefix}'s snapshot")

    def _start_ours(self, variant: Variant, prefix: str) -> None:
        config = {
            **common_config(self.pg_server, self.database, variant, prefix),
            "name": prefix,
            "offset.storage": "memory",
            "offset.flush.interval.ms": 100,
        }
        sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": self.bootstrap})
        sink.__enter__()
        self.sinks.append(sink)
        runner = EngineRunner(Engine(config, batch_handler=sink, serializer=JsonSerializer.from_config(config)))
        runner.__enter__()
        self.runners.append(runner)

    def stream(self) -> None:
        """The changes, then the marker; returns once every capture delivered everything."""
        with self.pg_server.connect(self.database, autocommit=False) as conn:
            for transaction in [*cases.STREAM, [cases.MARKER]]:
                for statement in transaction:
                    conn.execute(statement)
                conn.commit()
        for prefix in self.all_prefixes():
            wait_until(lambda p=prefix: _marker_landed(self.bootstrap, p), 180, f"{prefix}'s marker")
        # Connect's producer keeps one request in flight: every record before the marker has
        # landed. Ours may have several: wait until nothing waits for an acknowledgement.
        for sink in self.sinks:
            wait_until(lambda s=sink: s.metrics()["in_flight"] == 0, 60, "our sinks acknowledged")

    def events(self) -> Captured:
        return {
            v.name: (
                read_topics(self.bootstrap, self.prefixes[v.name][0]),
                read_topics(self.bootstrap, self.prefixes[v.name][1]),
            )
            for v in self.variants
        }

    def stop(self) -> None:
        for runner in self.runners:
            runner.__exit__(None, None, None)
        for sink in self.sinks:
            sink.__exit__(None, None, None)
        for name in self.connect.connectors():
            if name in {theirs for theirs, _ in self.prefixes.values()}:
                self.connect.delete(name)

    def all_prefixes(self) -> list[str]:
        return [prefix for pair in self.prefixes.values() for prefix in pair]

    def count(self, prefix: str, op: str | None = None) -> int:
        events = read_topics(self.bootstrap, prefix)
        return sum(1 for topic in events.values() for e in topic if op is None or e.op == op)


def _marker_landed(bootstrap: str, prefix: str) -> bool:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(f"{prefix}.public.oracle_marker", 0)
        if tp.topic not in consumer.topics():
            return False
        return bool(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def dump(result: Captured, path: str) -> None:
    dump = {
        name: [{t: [e.__dict__ for e in es] for t, es in side.items()} for side in pair]
        for name, pair in result.items()
    }
    Path(path).write_text(json.dumps(dump, indent=1))


@pytest.fixture(scope="module")
def captured(pg_server: Any, kafka_broker: Any, connect_worker: Any) -> Iterator[Captured]:
    """Run every capture over the cases; ``{variant: (debezium's events, ours)}`` by topic."""
    database = pg_server.create_database()
    client = ConnectClient(connect_worker.url)
    captures = Captures(pg_server, database, kafka_broker.bootstrap_servers, client)
    try:
        captures.prepare()
        captures.start()
        captures.stream()
        result = captures.events()
        if os.environ.get(DUMP_ENV_VAR):  # for reading the differences at leisure
            dump(result, os.environ[DUMP_ENV_VAR])
        yield result
    finally:
        captures.stop()
        client.close()
        pg_server.drop_database(database)


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_same_events_as_debezium(captured: Captured, variant: str) -> None:
    theirs, ours = captured[variant]
    assert sum(len(events) for events in theirs.values()) > SNAPSHOT_ROWS  # both captured something
    problems = compare(theirs, ours)
    assert not problems, summary(problems)
