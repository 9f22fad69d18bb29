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
* ``_cdc_query``: per streaming query, its transaction topic (so that a new query can tell the
  rows another query left on the same topic: a deleted checkpoint leaves them forever) and the
  stall count of its first waiting transaction (``transaction_order.Waiting``: it must survive
  the end of an available-now run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.spark.targets.sql.dialect import Dialect
from airflow_cdc.spark.transaction_order import Waiting

PENDING_TABLE = "_cdc_pending"
BATCH_TABLE = "_cdc_applied_batch"
QUERY_TABLE = "_cdc_query"
_WAITING = (
    "waiting_txid",
    "waiting_seen",
    "waiting_batches",
    "waiting_since_batch",
    "waiting_since_ms",
    "waiting_tables",
)

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
        f"CREATE TABLE IF NOT EXISTS {QUERY_TABLE} (query_id varchar(64) NOT NULL PRIMARY KEY, transaction_topic "
        "varchar(249) NOT NULL, waiting_txid varchar(255), waiting_seen bigint, waiting_batches int, "
        f"waiting_since_batch bigint, waiting_since_ms bigint, waiting_tables {text})",
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


def load(conn: Any, query_id: str) -> tuple[int | None, list[Record], Waiting | None]:
    """The last batch applied for ``query_id`` (None: none yet), its held records and its
    waiting transaction."""
    found = _execute(conn, f"SELECT batch_id FROM {BATCH_TABLE} WHERE query_id = %s", (query_id,))
    records = _execute(
        conn,
        f"SELECT record_topic, record_partition, record_offset, record_key, record_value FROM {PENDING_TABLE} "
        "WHERE query_id = %s",
        (query_id,),
    )
    waiting = _execute(
        conn,
        f"SELECT {', '.join(_WAITING)} FROM {QUERY_TABLE} WHERE query_id = %s AND waiting_txid IS NOT NULL",
        (query_id,),
    )
    conn.commit()  # a read: end it, so the apply's transaction sees what is committed when it starts
    kept = None
    if waiting:
        txid, seen, batches, since_batch, since_ms, tables = waiting[0]
        kept = Waiting(str(txid), int(seen), int(batches), int(since_batch), int(since_ms), str(tables or ""))
    return (int(found[0][0]) if found else None), [tuple(r) for r in records], kept


def others(conn: Any, query_id: str, tx_topic: str) -> list[str]:
    """Other streaming queries' ids with rows for ``tx_topic`` (a job whose checkpoint was deleted
    left them; or another job on the same target and topic)."""
    found = _execute(
        conn,
        f"SELECT query_id FROM {QUERY_TABLE} WHERE transaction_topic = %s AND query_id <> %s UNION "
        f"SELECT DISTINCT query_id FROM {PENDING_TABLE} WHERE record_topic = %s AND query_id <> %s",
        (tx_topic, query_id, tx_topic, query_id),
    )
    conn.commit()
    return sorted({str(r[0]) for r in found})


def delete_statement(query_ids: Sequence[str]) -> str:
    """The statements that delete these queries' rows from the three tables."""
    ids = ", ".join("'" + q.replace("'", "''") + "'" for q in query_ids)
    return " ".join(f"DELETE FROM {t} WHERE query_id IN ({ids});" for t in (PENDING_TABLE, BATCH_TABLE, QUERY_TABLE))


def replace(
    conn: Any,
    dialect: Dialect,
    query_id: str,
    batch_id: int,
    held: Sequence[Record],
    tx_topic: str = "",
    waiting: Waiting | None = None,
) -> None:
    """In the apply's transaction: the query's held records become ``held``, its last batch
    ``batch_id``, its waiting transaction ``waiting``. Only this job writes its rows, so deleting
    and inserting is a replacement."""
    _execute(conn, f"DELETE FROM {PENDING_TABLE} WHERE query_id = %s", (query_id,))
    columns = "query_id, record_topic, record_partition, record_offset, record_key, record_value"
    if held and not _mysql(dialect):
        # COPY: a batch may hold ten thousand records; the DELETE above leaves no conflict.
        with conn.cursor() as cur, cur.copy(f"COPY {PENDING_TABLE} ({columns}) FROM STDIN") as copy:
            for record in held:
                copy.write_row((query_id, *record))
    elif held:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT IGNORE INTO {PENDING_TABLE} ({columns}) VALUES (%s, %s, %s, %s, %s, %s)",
                [(query_id, *record) for record in held],
            )
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
    _execute(conn, f"DELETE FROM {QUERY_TABLE} WHERE query_id = %s", (query_id,))
    values = (
        (waiting.txid, waiting.seen, waiting.batches, waiting.since_batch, waiting.since_ms, waiting.tables)
        if waiting
        else (None,) * len(_WAITING)
    )
    _execute(
        conn,
        f"INSERT INTO {QUERY_TABLE} (query_id, transaction_topic, {', '.join(_WAITING)}) VALUES "
        f"(%s, %s, {', '.join(['%s'] * len(_WAITING))})",
        (query_id, tx_topic, *values),
    )
