"""MariaDB column values: Debezium's MariaDB connector captures a table of every type, and our
converters must give its ``after`` (and ``before``) values exactly (ADR 0009).

One database, captured by one Debezium connector per set of value-handling modes (snapshot,
then a stream of inserts, updates and deletes). Our side is the converters alone, fed what
the engine's source feeds them: ``snapshot_converter`` gets the rows PyMySQL SELECTs before
the stream starts (compared with Debezium's ``op=r`` events), ``binlog_converter`` the row
images mysql-replication reads from the binlog from the GTID position recorded before the
first write (with ``is_mariadb=True``, mysql-replication 1.0.x ignores a file and position),
compared with Debezium's ``c``/``u``/``d`` events in order.

Debezium's snapshot and its stream give some values different JSON (its snapshot reads
through JDBC): the stream repeats every snapshot row with an id 10 higher, so both of its
readers see every value, and each converter must give its own reader's.
"""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.sources.mysql.types import (
    Converter,
    MySqlColumn,
    ValueModes,
    binlog_converter,
    snapshot_converter,
)
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from tests.compat import mariadb_cases as cases
from tests.compat.oracle import Event, Variant, read_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VARIANTS = (
    Variant("defaults"),
    Variant(
        "string-hex-precise-connect",
        {
            "decimal.handling.mode": "string",
            "binary.handling.mode": "hex",
            "bigint.unsigned.handling.mode": "precise",
            "time.precision.mode": "connect",
        },
    ),
    Variant("double-base64-url-safe", {"decimal.handling.mode": "double", "binary.handling.mode": "base64-url-safe"}),
)

#: Set to a file path to pickle everything captured there (Debezium's events and our inputs).
DUMP_ENV_VAR = "CDC_ORACLE_DUMP"
#: What the snapshot connection must be opened with (the converters' module docstring).
SNAPSHOT_CONNECTION = {"charset": "utf8mb4", "init_command": "SET time_zone='+00:00'"}


@dataclass
class BinlogChange:
    op: str  # c, u, d
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass
class Capture:
    columns: dict[str, list[MySqlColumn]]  # by table
    snapshot_rows: dict[str, list[dict[str, Any]]]  # PyMySQL's rows before the stream, by table
    binlog: dict[str, list[BinlogChange]]  # mysql-replication's changes, by table, in binlog order
    debezium: dict[str, dict[str, list[Event]]]  # by variant, then table


def _connector_config(
    server: Any, database: str, variant: Variant, prefix: str, bootstrap: str, server_id: int, n: int
) -> dict[str, Any]:
    return {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "tasks.max": 1,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "",
        "database.server.id": server_id + n,
        "database.ssl.mode": "disable",
        "topic.prefix": prefix,
        "database.include.list": database,
        "snapshot.mode": "initial",
        "include.schema.changes": "false",
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "schema.history.internal.kafka.topic": f"{prefix}-history",
        # Connect's JsonConverter writes a column's default in place of a NULL unless told not
        # to (KIP-581, ADR 0009): a NULL is a NULL.
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "value.converter.replace.null.with.default": "false",
        **variant.settings,
    }


def _session(server: Any, database: str) -> pymysql.connections.Connection:
    return server.connect(database=database, charset="utf8mb4", init_command="SET sql_mode='', time_zone='+00:00'")


def _columns(server: Any, database: str) -> dict[str, list[MySqlColumn]]:
    with server.connect(cursorclass=pymysql.cursors.DictCursor) as conn, conn.cursor() as cur:
        cur.execute(
            "select * from information_schema.columns where table_schema = %s order by table_name, ordinal_position",
            (database,),
        )
        out: dict[str, list[MySqlColumn]] = {}
        for row in cur.fetchall():
            out.setdefault(row["TABLE_NAME"], []).append(MySqlColumn.from_information_schema(row))
        return out


def _select_all(server: Any, database: str) -> dict[str, list[dict[str, Any]]]:
    connection = server.connect(database=database, cursorclass=pymysql.cursors.DictCursor, **SNAPSHOT_CONNECTION)
    with connection as conn, conn.cursor() as cur:
        rows = {}
        for table in cases.TABLES:
            cur.execute(f"select * from `{table}` order by id")
            rows[table] = list(cur.fetchall())
        return rows


def _read_binlog(server: Any, database: str, gtid: str, server_id: int) -> dict[str, list[BinlogChange]]:
    """The engine's own reading of the binlog from ``gtid`` (taken before the tables were
    created): the binlog reader, the schema history built from the DDL it reads, and the row
    decoder - as the connector reads it, with the server's binlog_row_metadata, whatever it is."""
    from airflow_cdc.engine.sources.mysql.binlog import BinlogReader, RowEvent, SchemaChange
    from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
    from airflow_cdc.engine.sources.mysql.row_decoder import compile_table
    from airflow_cdc.engine.sources.mysql.schema import SchemaHistory
    from airflow_cdc.engine.sources.mysql.server import check_server
    from airflow_cdc.engine.sources.mysql.tracking import StartPoint

    def ours(schema: str, _table: str) -> bool:
        return schema == database

    with server.connect() as conn:
        info = check_server(conn)
        history = SchemaHistory(None, ours)
        start = StartPoint(MariaDbGtidSet.parse(gtid), "", 0)
        reader = BinlogReader(server.connection_params(), server_id=server_id, start=start, server=info, tables=ours)
        changes: dict[str, list[BinlogChange]] = {}
        try:
            while "oracle_marker" not in changes:
                for item in reader.read(500, 1.0):
                    if isinstance(item, SchemaChange):
                        history.apply(conn, item.ddl, item.database, item.offset)
                    elif isinstance(item, RowEvent):
                        table = history.tables[(item.database, item.table)]
                        names = [c.name for c in table.columns]
                        for row in item.changes(compile_table(item.binlog_columns, table)):
                            before = None if row.before is None else dict(zip(names, row.before, strict=True))
                            after = None if row.after is None else dict(zip(names, row.after, strict=True))
                            changes.setdefault(item.table, []).append(BinlogChange(row.op, before, after))
        finally:
            reader.close()
    return changes


def _marker_landed(bootstrap: str, prefix: str, database: str) -> bool:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(f"{prefix}.{database}.oracle_marker", 0)
        if tp.topic not in consumer.topics():
            return False
        return bool(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _count_snapshot(bootstrap: str, prefix: str) -> int:
    return sum(1 for events in read_topics(bootstrap, prefix).values() for e in events if e.op == "r")


@pytest.fixture(scope="module")
def capture(mariadb_server: Any, kafka_broker: Any, connect_worker: Any) -> Iterator[Capture]:
    database = mariadb_server.create_database()
    bootstrap = kafka_broker.bootstrap_servers
    run = uuid.uuid4().hex[:6]
    prefixes = {v.name: f"mdb_{run}_{i}" for i, v in enumerate(VARIANTS)}
    # Replication clients of one server need distinct server ids; other tests share the server.
    server_id = 100_000 + int(run, 16) % 1_000_000
    client = ConnectClient(connect_worker.url)
    try:
        with _session(mariadb_server, database) as conn, conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos")
            gtid = cur.fetchone()[0]
            for statement in (*cases.SCHEMA, *cases.SNAPSHOT):
                cur.execute(statement)
        columns = _columns(mariadb_server, database)
        snapshot_rows = _select_all(mariadb_server, database)
        for n, variant in enumerate(VARIANTS):
            prefix = prefixes[variant.name]
            config = _connector_config(mariadb_server, database, variant, prefix, bootstrap, server_id, n)
            client.create(prefix, config)
        for prefix in prefixes.values():
            client.wait_running(prefix, timeout=120)
            wait_until(
                lambda p=prefix: _count_snapshot(bootstrap, p) >= len(cases.SNAPSHOT), 180, f"{prefix}'s snapshot"
            )
        with _session(mariadb_server, database) as conn, conn.cursor() as cur:
            for transaction in (*cases.STREAM, (cases.MARKER,)):
                conn.begin()
                for statement in transaction:
                    cur.execute(statement)
                conn.commit()
        for prefix in prefixes.values():
            wait_until(lambda p=prefix: _marker_landed(bootstrap, p, database), 180, f"{prefix}'s marker")
        debezium = {}
        for name, prefix in prefixes.items():
            topics = read_topics(bootstrap, prefix)
            debezium[name] = {topic.split(".", 1)[1]: events for topic, events in topics.items() if "." in topic}
        captured = Capture(
            columns, snapshot_rows, _read_binlog(mariadb_server, database, gtid, server_id - 1), debezium
        )
        _dump(captured)
        yield captured
    finally:
        for prefix in prefixes.values():
            if prefix in client.connectors():
                client.delete(prefix)
        client.close()
        mariadb_server.drop_database(database)


def _convert_row(row: Mapping[str, Any] | None, converters: Mapping[str, Converter | None]) -> dict[str, Any] | None:
    if row is None:
        return None
    out = {}
    for name, value in row.items():
        convert = converters[name]
        if convert is not None:
            out[name] = None if value is None else convert(value)
    return out


def _differences(where: str, theirs: Mapping[str, Any] | None, ours: Mapping[str, Any] | None) -> list[str]:
    if theirs is None or ours is None:
        return [] if theirs is ours else [f"{where}: debezium {theirs!r} != ours {ours!r}"]
    problems = []
    for name in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(name, "<absent>"), ours.get(name, "<absent>")
        if a != b or type(a) is not type(b):
            problems.append(f"{where}.{name}: debezium {a!r} != ours {b!r}")
    return problems


def _dump(capture: Capture) -> None:
    """Everything captured, for reading the differences at leisure (pickle: Python's types)."""
    path = os.environ.get(DUMP_ENV_VAR)
    if path:
        Path(path).write_bytes(pickle.dumps(capture))


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_snapshot_values_as_debezium(capture: Capture, variant: str) -> None:
    """Debezium's ``op=r`` events: snapshot_converter on PyMySQL's SELECT of the same rows."""
    modes = ValueModes.from_config(next(v for v in VARIANTS if v.name == variant).settings)
    problems: list[str] = []
    for table in cases.TABLES:
        converters = {c.name: snapshot_converter(c, modes) for c in capture.columns[table]}
        ours = {row["id"]: _convert_row(row, converters) for row in capture.snapshot_rows[table]}
        theirs = {e.value["after"]["id"]: e.value["after"] for e in capture.debezium[variant][table] if e.op == "r"}
        assert set(theirs) == set(ours), table
        for key in sorted(theirs):
            problems += _differences(f"{table}[{key}] r", theirs[key], ours[key])
    assert not problems, "\n".join(problems)


def _debezium_streamed_uuid(value: str) -> str:
    """Debezium's binlog reader gets a MariaDB uuid's 16 bytes with the trailing zero bytes
    stripped (a fixed-length string in the binlog) and reads the rest as one unsigned number
    (new BigInteger(1, bytes)): 123e4567-...-426614174000 streams as 00123e45-...-564266141740."""
    stripped = uuid.UUID(value).bytes.rstrip(b"\0")
    return str(uuid.UUID(int=int.from_bytes(stripped, "big")))


#: Where we emit a value on purpose that Debezium's event does not have (ADR 0009), with the
#: check that Debezium's value is exactly the loss we avoid: (table, column) -> (reason, what
#: Debezium emits for our value).
DEVIATIONS = {
    ("misc", "u"): (
        "a streamed MariaDB uuid ending in zero bytes: Debezium shifts it (it loses the trailing zero bytes); "
        "we emit the uuid",
        _debezium_streamed_uuid,
    ),
}


def _stream_differences(
    table: str, where: str, theirs: Mapping[str, Any] | None, ours: Mapping[str, Any] | None
) -> list[str]:
    problems = []
    for problem in _differences(where, theirs, ours):
        column = problem.split(":")[0].rsplit(".", 1)[1]
        deviation = DEVIATIONS.get((table, column))
        if deviation and theirs and ours and theirs[column] == deviation[1](ours[column]):
            continue
        problems.append(problem)
    return problems


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_binlog_values_as_debezium(capture: Capture, variant: str) -> None:
    """binlog_converter on mysql-replication's row images of the streamed changes gives
    Debezium's ``c``/``u``/``d`` events, in order. (The stream repeats every snapshot row
    with an id 10 higher; the snapshot rows' own inserts are in the binlog too, but Debezium
    read those through JDBC, see the snapshot test.)"""
    modes = ValueModes.from_config(next(v for v in VARIANTS if v.name == variant).settings)
    problems: list[str] = []
    declared = {
        table: [MySqlColumn(name, data_type, column_type) for name, data_type, column_type in columns]
        for table, columns in cases.STREAMED_TABLES.items()
    }
    for table in (*cases.TABLES, *cases.STREAMED_TABLES):
        columns = capture.columns[table] if table in capture.columns else declared[table]
        converters = {c.name: binlog_converter(c, modes) for c in columns}
        streamed = capture.binlog[table][len(capture.snapshot_rows.get(table, ())) :]
        stream = [e for e in capture.debezium[variant][table] if e.op != "r" and e.value is not None]
        assert [e.op for e in stream] == [c.op for c in streamed], table
        for index, (event, change) in enumerate(zip(stream, streamed, strict=True)):
            for side in ("before", "after"):
                ours = _convert_row(getattr(change, side), converters)
                where = f"{table} stream[{index}] {event.op} {side}"
                problems += _stream_differences(table, where, event.value[side], ours)
    assert not problems, "\n".join(problems)
