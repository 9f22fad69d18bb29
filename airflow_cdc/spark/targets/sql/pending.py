"""The SQL target's own state for the transaction-consistent mode (ADR 0023).

Two tables in the target's default schema / database, next to the applied tables so that they
commit in the same database transaction as the rows:

* ``_cdc_pending``: the raw records (Kafka's topic, partition, offset, key, value) of source
  transactions not yet complete, held back from the target until a later batch completes them.
  Keyed by the streaming query and the record's topic-partition-offset: the same record is never
  held twice.
* ``_cdc_applied_batch``: per streaming query (Spark's query id, which its checkpoint keeps), the
  last micro-batch applied. A batch that Spark replays after a crash (its offsets were not yet
  committed to the checkpoint, but the target's transaction was) is skipped whole: replaying it
  against the pending records as they are *after* it would see a transaction's earlier records
  gone (applied) and hold the rest back forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.spark.targets.sql.dialect import Dialect

PENDING_TABLE = "_cdc_pending"
BATCH_TABLE = "_cdc_applied_batch"

#: (topic, partition, offset, key, value): a raw record (``frames.RAW_SCHEMA``).
Record = tuple[str, int, int, str | None, str | None]


def _mysql(dialect: Dialect) -> bool:
    return dialect.identifier("x").startswith("`")


def _text(dialect: Dialect) -> str:
    # MySQL's TEXT holds 64 KiB; a change event with a large row is more.
    return "longtext" if _mysql(dialect) else "text"


def _ddl(dialect: Dialect) -> list[str]:
    text = _text(dialect)
    return [
        f"CREATE TABLE IF NOT EXISTS {PENDING_TABLE} (query_id varchar(64) NOT NULL, record_topic varchar(249) NOT "
        f"NULL, record_partition int NOT NULL, record_offset bigint NOT NULL, record_key {text}, record_value {text}, "
        "PRIMARY KEY (query_id, record_topic, record_partition, record_offset))",
        f"CREATE TABLE IF NOT EXISTS {BATCH_TABLE} (query_id varchar(64) NOT NULL PRIMARY KEY, batch_id bigint NOT "
        "NULL)",
    ]


def _execute(conn: Any, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return list(cur.fetchall()) if cur.description else []


def ensure_tables(conn: Any, dialect: Dialect) -> None:
    """Creates both tables if missing and commits (MySQL's DDL commits anyway, so it never runs
    inside the apply's transaction)."""
    for statement in _ddl(dialect):
        _execute(conn, statement)
    conn.commit()


def load(conn: Any, query_id: str) -> tuple[int | None, list[Record]]:
    """The last batch applied for ``query_id`` (None: none yet) and its held records."""
    found = _execute(conn, f"SELECT batch_id FROM {BATCH_TABLE} WHERE query_id = %s", (query_id,))
    records = _execute(
        conn,
        f"SELECT record_topic, record_partition, record_offset, record_key, record_value FROM {PENDING_TABLE} "
        "WHERE query_id = %s",
        (query_id,),
    )
    conn.commit()  # a read: end it, so the apply's transaction sees what is committed when it starts
    return (int(found[0][0]) if found else None), [tuple(r) for r in records]


def replace(conn: Any, dialect: Dialect, query_id: str, batch_id: int, held: Sequence[Record]) -> None:
    """In the apply's transaction: the query's held records become ``held``, its last batch
    ``batch_id``. Only this job writes its rows, so deleting and inserting is a replacement."""
    _execute(conn, f"DELETE FROM {PENDING_TABLE} WHERE query_id = %s", (query_id,))
    if held:
        verb = "INSERT IGNORE INTO" if _mysql(dialect) else "INSERT INTO"
        tail = "" if _mysql(dialect) else " ON CONFLICT DO NOTHING"
        statement = (
            f"{verb} {PENDING_TABLE} (query_id, record_topic, record_partition, record_offset, record_key, "
            f"record_value) VALUES (%s, %s, %s, %s, %s, %s){tail}"
        )
        with conn.cursor() as cur:
            cur.executemany(statement, [(query_id, *record) for record in held])
    if _mysql(dialect):
        upsert = (
            f"INSERT INTO {BATCH_TABLE} (query_id, batch_id) VALUES (%s, %s) "
            "ON DUPLICATE KEY UPDATE batch_id = VALUES(batch_id)"
        )
    else:
        upsert = (
            f"INSERT INTO {BATCH_TABLE} (query_id, batch_id) VALUES (%s, %s) "
            "ON CONFLICT (query_id) DO UPDATE SET batch_id = excluded.batch_id"
        )
    _execute(conn, upsert, (query_id, batch_id))
