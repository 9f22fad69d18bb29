"""MariaDB: Debezium's MariaDB connector and our engine capture the same database, with the same
configuration keys, for each set of value-handling modes; their events must be the same, whole
event by whole event (ADR 0009; the values alone are checked in test_mariadb_types_oracle.py).

One database of its own on the shared server: an initial snapshot, then a stream of inserts,
updates and deletes with tombstones, a primary-key change, a multi-row transaction, DDL (ADD,
DROP, RENAME COLUMN) between rows, a keyless table and a composite key, binary keys and values
that are not UTF-8, unsigned maxima, ENUM and SET (``mariadb_cases.EVENT_*``) - streamed with the
server's default ``binlog_row_metadata`` (NO_LOG), then the binary and unsigned rows again with
FULL. Debezium's connector runs on the Connect fixture (JSON converter,
schemas disabled, ``replace.null.with.default=false``), ours through its Kafka sink, into the
same broker under another ``topic.prefix``; both begin at their own snapshot's binlog point
(GTID), so neither reads the shared server's older binlog. Topics are compared with
``oracle.compare`` under ``MARIADB_RULES`` (what may differ, and why, is documented there).

``include.schema.changes`` is on (Debezium's default) on both sides: the schema change topic,
named ``topic.prefix`` (``oracle.SCHEMA_TOPIC``), is compared like the others - the snapshot's
SET / DROP TABLE / DROP, CREATE, USE DATABASE / CREATE TABLE events (by shape where they name
each side's own snapshot point), then each streamed DDL's (ALTER, a table created, indexed and
dropped while streaming) in binlog order.
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
from tests.compat import mariadb_cases as cases
from tests.compat.oracle import MARIADB_RULES, Event, Variant, compare, read_topics, summary

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VARIANTS = (
    Variant("defaults"),
    Variant(
        "connect-string-no-tombstones",
        {
            "time.precision.mode": "connect",
            "decimal.handling.mode": "string",
            "tombstones.on.delete": "false",
        },
    ),
    # The transaction topic (a DDL's GTID begins a transaction that never ends, in both) and
    # every event's transaction block.
    Variant("transaction-metadata", {"provide.transaction.metadata": "true"}),
    # TRUNCATE TABLE's record (op t), which the default skips.
    Variant("truncates", {"skipped.operations": "none"}),
)

#: Set to a file path to write both sides' events there as JSON.
DUMP_ENV_VAR = "CDC_ORACLE_DUMP"

Captured = dict[str, tuple[dict[str, list[Event]], dict[str, list[Event]]]]


def common_config(server: Any, database: str, variant: Variant, prefix: str, server_id: int) -> dict[str, Any]:
    """The keys both sides get, unchanged (they are Debezium's). Each capture is a replica of
    its own: ``database.server.id`` differs (``source.server_id`` is the origin server's)."""
    return {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "",
        "database.server.id": server_id,
        "database.include.list": database,
        "topic.prefix": prefix,
        "snapshot.mode": "initial",
        **variant.settings,
    }


def _session(server: Any, database: str) -> Any:
    return server.connect(database=database, charset="utf8mb4", init_command="SET sql_mode='', time_zone='+00:00'")


class Captures:
    """Both sides of every variant over one database."""

    def __init__(
        self,
        server: Any,
        database: str,
        bootstrap: str,
        connect: ConnectClient,
        variants: tuple[Variant, ...] = VARIANTS,
        snapshot_rows: int = cases.EVENT_SNAPSHOT_ROWS,
    ) -> None:
        self.server, self.database, self.bootstrap, self.connect = server, database, bootstrap, connect
        self.variants, self.snapshot_rows = variants, snapshot_rows
        run = uuid.uuid4().hex[:6]
        self.prefixes = {v.name: (f"mdbz_{run}_{i}", f"mours_{run}_{i}") for i, v in enumerate(variants)}
        # Replicas of one server need distinct server ids; other tests share the server.
        self.server_id = 200_000 + int(run, 16) % 1_000_000
        self.sinks: list[KafkaSink] = []
        self.runners: list[EngineRunner] = []

    def prepare(self, statements: tuple[str, ...] = (*cases.EVENT_SCHEMA, *cases.EVENT_SNAPSHOT)) -> None:
        with _session(self.server, self.database) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def start(self) -> None:
        for n, variant in enumerate(self.variants):
            theirs, ours = self.prefixes[variant.name]
            config = common_config(self.server, self.database, variant, theirs, self.server_id + 2 * n)
            debezium_only = {
                "tasks.max": 1,
                "database.ssl.mode": "disable",
                "schema.history.internal.kafka.bootstrap.servers": self.bootstrap,
                "schema.history.internal.kafka.topic": f"{theirs}-history",
                # Connect's JsonConverter writes a column's default in place of a NULL unless told
                # not to (KIP-581, ADR 0009): a NULL is a NULL.
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "value.converter.replace.null.with.default": "false",
            }
            self.connect.create(theirs, {**config, **debezium_only, **variant.settings})
            self._start_ours(common_config(self.server, self.database, variant, ours, self.server_id + 2 * n + 1))
        for variant in self.variants:
            self.connect.wait_running(self.prefixes[variant.name][0], timeout=120)
        for prefix in self.all_prefixes():
            wait_until(lambda p=prefix: self.count(p, "r") >= self.snapshot_rows, 180, f"{prefix}'s snapshot")

    def _start_ours(self, config: dict[str, Any]) -> None:
        prefix = config["topic.prefix"]
        config = {**config, "name": prefix, "offset.storage": "memory", "offset.flush.interval.ms": 100}
        sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": self.bootstrap})
        sink.__enter__()
        self.sinks.append(sink)
        runner = EngineRunner(Engine(config, batch_handler=sink, serializer=JsonSerializer.from_config(config)))
        runner.__enter__()
        self.runners.append(runner)

    def stream(self) -> None:
        """The changes - with the server's binlog_row_metadata, then with FULL - then the
        marker; returns once every capture delivered everything."""
        with _session(self.server, self.database) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
            metadata = cur.fetchone()[0]
            self._transactions(conn, cur, cases.EVENT_STREAM)
            cur.execute("SET GLOBAL binlog_row_metadata = FULL")
            try:
                self._transactions(conn, cur, cases.EVENT_STREAM_FULL_METADATA)
            finally:
                cur.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
            self._transactions(conn, cur, ((cases.EVENT_MARKER,),))
        for prefix in self.all_prefixes():
            wait_until(lambda p=prefix: self._marker_landed(p), 180, f"{prefix}'s marker")
        # Connect's producer keeps one request in flight: every record before the marker has
        # landed. Ours may have several: wait until nothing waits for an acknowledgement.
        for sink in self.sinks:
            wait_until(lambda s=sink: s.metrics()["in_flight"] == 0, 60, "our sinks acknowledged")

    @staticmethod
    def _transactions(conn: Any, cur: Any, transactions: Any) -> None:
        for transaction in transactions:
            conn.begin()
            for statement in transaction:
                cur.execute(statement)
            conn.commit()

    def _marker_landed(self, prefix: str) -> bool:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        try:
            tp = TopicPartition(f"{prefix}.{self.database}.oracle_marker", 0)
            if tp.topic not in consumer.topics():
                return False
            return bool(consumer.end_offsets([tp])[tp])
        finally:
            consumer.close()

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
        theirs = {pair[0] for pair in self.prefixes.values()}
        for name in self.connect.connectors():
            if name in theirs:
                self.connect.delete(name)

    def all_prefixes(self) -> list[str]:
        return [prefix for pair in self.prefixes.values() for prefix in pair]

    def count(self, prefix: str, op: str | None = None) -> int:
        events = read_topics(self.bootstrap, prefix)
        return sum(1 for topic in events.values() for e in topic if op is None or e.op == op)


def dump(result: Captured, path: str) -> None:
    dump = {
        name: [{t: [e.__dict__ for e in es] for t, es in side.items()} for side in pair]
        for name, pair in result.items()
    }
    Path(path).write_text(json.dumps(dump, indent=1))


@pytest.fixture(scope="module")
def captured(mariadb_server: Any, kafka_broker: Any, connect_worker: Any) -> Iterator[Captured]:
    """Run every capture over the cases; ``{variant: (debezium's events, ours)}`` by topic."""
    database = mariadb_server.create_database()
    client = ConnectClient(connect_worker.url)
    captures = Captures(mariadb_server, database, kafka_broker.bootstrap_servers, client)
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
        mariadb_server.drop_database(database)


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_same_events_as_debezium(captured: Captured, variant: str) -> None:
    theirs, ours = captured[variant]
    assert sum(len(events) for events in theirs.values()) > cases.EVENT_SNAPSHOT_ROWS  # both captured something
    problems = compare(theirs, ours, MARIADB_RULES)
    assert not problems, summary(problems)
