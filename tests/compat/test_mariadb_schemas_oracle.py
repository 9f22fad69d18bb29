"""MariaDB with the JSON converter's schemas enabled (``key.converter.schemas.enable``,
``value.converter.schemas.enable``) and the source-type parameters
(``column.propagate.source.type``, ``datatype.propagate.source.type``): Debezium's MariaDB
connector and our engine capture the same database; every event's payload is compared as in
test_mariadb_oracle.py, and its key and value schemas whole (ADR 0024).

The database holds a table per family of types (``mariadb_cases.SCHEMA``, the value oracle's,
with its snapshot rows), and the stream inserts those rows again, creates tables whose schema is
the statement's (a BOOL is a boolean, defaults, a comment) and changes the table ``evolving``
step by step - ADD COLUMN with and without a default, DROP COLUMN, MODIFY int to bigint,
varchar(20) to varchar(200), decimal(10,2) to decimal(20,4), RENAME COLUMN: the events after
each DDL must carry the new schema, as Debezium's do. Each step waits until every capture has
delivered it (a marker row).

The schema change topic (``include.schema.changes``, on) is compared too, its key and value
schemas (``SchemaChangeKey``/``SchemaChangeValue``) included.

The schemas' names start with each side's ``topic.prefix`` (``<prefix>.db.t.Key``), which the
oracle makes different so that both sides share one broker: the prefix is masked. A struct's
fields are compared by position and name (``fields.<i>:<name>``) so that a difference names the
field it is in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from tests.compat import mariadb_cases as cases
from tests.compat.oracle import MARIADB_RULES, Variant, compare, summary
from tests.compat.test_mariadb_oracle import DUMP_ENV_VAR, Captured, Captures, _session, dump
from tests.compat.test_postgres_schemas_oracle import _split_all

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
            # By column (database.table.column) and by type (database.table.TYPE), as Debezium matches.
            "column.propagate.source.type": r".*\.nums\..*,.*\.texts\.(vc|c|l1),.*\.temporal\.dt3,.*\.evolving\..*",
            "datatype.propagate.source.type": r".+\.TIMESTAMP,.+\.INT UNSIGNED,.+\.ENUM,.+\.BIT,.+\.BOOL",
            "decimal.handling.mode": "string",
            "time.precision.mode": "connect",
        },
    ),
    # Every column of every type with its source type, length and scale.
    Variant(
        "schemas-propagate-all",
        {**SCHEMAS_ON, "column.propagate.source.type": ".*", "bigint.unsigned.handling.mode": "precise"},
    ),
    # The other modes that change a column's schema.
    Variant(
        "schemas-modes",
        {
            **SCHEMAS_ON,
            "decimal.handling.mode": "double",
            "binary.handling.mode": "hex",
            "bigint.unsigned.handling.mode": "precise",
        },
    ),
    # The transaction topic's schemas and every event's transaction block; no tombstones.
    Variant(
        "schemas-transactions",
        {**SCHEMAS_ON, "provide.transaction.metadata": "true", "tombstones.on.delete": "false"},
    ),
)

#: Columns with defaults of every kind and a comment: Debezium's schema carries each default
#: converted as the column's values are (BinlogDefaultValueConverter), the comment as ``doc``.
DEFAULTS = """(
    id integer not null auto_increment, code varchar(8) character set latin1 default 'x',
    price decimal(6,2) unsigned default 0 comment 'cost', kind enum('a','b') not null default 'a',
    at timestamp(3) null default current_timestamp(3), flag bool default true,
    born date default '2001-02-03', t time default '01:02:03', dt datetime(6) default '2020-01-02 03:04:05.5',
    y year default 1999, f float default 1.5, bt bit(3) default b'101', b1 bit(1) not null default b'1',
    vb varbinary(4) default 'ab', bn binary(3) default 'a', vx varbinary(4) default x'0A0B',
    q varchar(10) default 'q''s', tx text default 'long', dn datetime not null default current_timestamp,
    dz date default '0000-00-00', d6 decimal(6,3) default 1.23456, primary key (id))"""

#: The value oracle's tables but ``misc`` (its streamed uuid is a deliberate deviation, checked
#: in test_mariadb_types_oracle.py), and the marker (created below).
TABLES = tuple(t for t in cases.TABLES if t != "misc")
SCHEMA = (
    *(s for s in cases.SCHEMA if "oracle_marker" not in s),
    "create table evolving (id int primary key, a int, n int not null default 1, v varchar(20), d decimal(10,2))",
    # No key (null keys, no key schema) and a composite key in its own order.
    "create table keyless (at datetime, msg varchar(100) not null default '', level tinyint)",
    "create table composite (b varchar(4) not null, a int not null, v int, primary key (a, b))",
    # The same defaults read by the snapshot (SHOW CREATE TABLE, information_schema here).
    f"create table early_defaults {DEFAULTS}",
    "create table oracle_marker (id int primary key)",
)
SNAPSHOT = (
    *cases.SNAPSHOT,
    "insert into evolving values (1, 10, 1, 'one', 1.25)",
    "insert into keyless values ('2024-01-01 00:00:00', 'boot', 1)",
    "insert into composite values ('x', 1, 10)",
    "insert into early_defaults (code) values ('snap')",
)
SNAPSHOT_ROWS = len(cases.SNAPSHOT) + 4

#: Streamed before the schema changes: the snapshot's rows again (ids 10 higher), and tables
#: created while streaming, whose schema is the statement's.
STREAM: tuple[tuple[str, ...], ...] = (
    tuple(s for s in cases.streamed_inserts() if not s.startswith("insert into misc")),
    # Updates, deletes (tombstones carry the key's schema), a primary-key change.
    (
        "update ints set ti = -1, biu = 1 where id = 11",
        "update nums set d = 0.01 where id = 12",
        "delete from texts where id = 13",
        "update temporal set id = 30 where id = 13",
        "insert into keyless values (null, 'two', 2)",
        "update keyless set level = 3 where msg = 'boot'",
        "delete from keyless where msg = 'two'",
        "insert into composite values ('y', 1, 20)",
        "update composite set v = 11 where a = 1 and b = 'x'",
        "delete from composite where b = 'y'",
    ),
    *cases.STREAM[4:],  # late_bool: BOOL columns a statement declares
    (f"create table late_table {DEFAULTS}",),
    ("insert into late_table (code, flag) values ('two', false)", "insert into late_table (code) values ('one')"),
    ("insert into oracle_marker values (1)",),
)

#: The schema changes of ``evolving``: each step's DDL, then its rows and its marker in one
#: transaction.
SCHEMA_CHANGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("alter table evolving add column b int default 5", ("insert into evolving (id, a) values (2, 20)",)),
    (
        "alter table evolving add column c varchar(10) not null",
        ("insert into evolving (id, c) values (3, 'c')", "update evolving set a = 11 where id = 1"),
    ),
    ("alter table evolving drop column a", ("insert into evolving (id, b, c) values (4, 40, 'x')",)),
    ("alter table evolving modify n bigint not null default 2", ("insert into evolving (id, n, c) values (5, 5, '')",)),
    (
        "alter table evolving modify v varchar(200)",
        ("insert into evolving (id, v, c) values (6, repeat('v', 150), '')",),
    ),
    ("alter table evolving modify d decimal(20,4)", ("update evolving set d = 12345.6789 where id = 1",)),
    ("alter table evolving rename column v to vv", ("insert into evolving (id, vv, c) values (7, 'r', 'r')",)),
    # Beyond the list: a default changed and dropped, CHANGE (rename, retype, nullability), a
    # column placed first, an index (no column change).
    ("alter table evolving alter column b set default 9", ("insert into evolving (id, c) values (8, 's')",)),
    ("alter table evolving change column c cc varchar(30) null", ("insert into evolving (id) values (9)",)),
    ("alter table evolving add column f int default -1 first", ("update evolving set b = 1 where id = 9",)),
    ("alter table evolving alter column b drop default, add index (b)", ("delete from evolving where id = 8",)),
)


def _marker_count(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp]) if topic in consumer.topics() else 0
    finally:
        consumer.close()


def stream(captures: Captures) -> None:
    """The stream, then the schema changes one step at a time, each delivered by every capture
    before the next."""
    with _session(captures.server, captures.database) as conn, conn.cursor() as cur:
        Captures._transactions(conn, cur, STREAM)
    steps = [(None, ("insert into oracle_marker values (1)",)), *SCHEMA_CHANGES]
    for step, (statement, rows) in enumerate(steps, start=1):
        if statement is not None:
            with _session(captures.server, captures.database) as conn, conn.cursor() as cur:
                cur.execute(statement)
                Captures._transactions(conn, cur, ((*rows, f"insert into oracle_marker values ({step})"),))
        for prefix in captures.all_prefixes():
            topic = f"{prefix}.{captures.database}.oracle_marker"
            wait_until(
                lambda t=topic, n=step: _marker_count(captures.bootstrap, t) >= n, 180, f"{prefix}'s step {step}"
            )
    for sink in captures.sinks:
        wait_until(lambda s=sink: s.metrics()["in_flight"] == 0, 60, "our sinks acknowledged")


@pytest.fixture(scope="module")
def captured(mariadb_server: Any, kafka_broker: Any, connect_worker: Any) -> Iterator[Captured]:
    database = mariadb_server.create_database()
    client = ConnectClient(connect_worker.url)
    captures = Captures(mariadb_server, database, kafka_broker.bootstrap_servers, client, VARIANTS, SNAPSHOT_ROWS)
    try:
        captures.prepare((*SCHEMA, *SNAPSHOT))
        captures.start()
        stream(captures)
        raw = captures.events()
        if os.environ.get(DUMP_ENV_VAR):
            dump(raw, os.environ[DUMP_ENV_VAR])
        yield {
            name: tuple(_split_all(side, prefix) for side, prefix in zip(pair, captures.prefixes[name], strict=True))
            for name, pair in raw.items()
        }  # type: ignore[misc]
    finally:
        captures.stop()
        client.close()
        mariadb_server.drop_database(database)


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_same_events_and_schemas_as_debezium(captured: Captured, variant: str) -> None:
    theirs, ours = captured[variant]
    assert sum(len(events) for events in theirs.values()) > SNAPSHOT_ROWS
    problems = compare(theirs, ours, MARIADB_RULES)
    assert not problems, summary(problems, limit=200)
