"""The two apply sides of bench/apply_vs_jdbc_sink.py, and the row-by-row check of a target.

- ``jdbc_sink``: Debezium's JDBC sink connector on the Connect worker, upserting into a table
  created beforehand with the source's DDL (``schema.evolution=none``: the same table our job
  writes, so neither side's figure includes creating it or depends on types it would pick).
  Timed from the connector's creation until the target equals the source (a fingerprint polled
  four times a second once the sink committed 90% of the topic, then the full check); the first
  row's arrival is noted too.
- ``ours``: the apply job (``airflow_cdc.spark.apply.run``, Spark's Kafka source, availableNow,
  no per-batch limit) in the bench's SparkSession, timed from ``run`` to its return.
- ``ours_phases``: the phases the run's batches report (read, transform, write), and the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apply_capture import PARTITIONS, SCHEMA_JSON, check_connector, end_offsets
from confluent_kafka import Consumer, TopicPartition
from spark_apply import COLUMNS, DDL, target_url

from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.local.postgres import PostgresServer

#: A target that stopped changing while the sink has committed every offset, and still differs.
SETTLE_S = 30
RUN_TIMEOUT_S = 1800


def fresh_target(pg: PostgresServer) -> str:
    database = pg.create_database()
    with pg.connect(database) as conn:
        conn.execute(DDL.format("items"))
    return database


def fingerprint(pg: PostgresServer, database: str) -> tuple[int, int]:
    """Row count and a sum of row hashes: cheap enough to poll while a sink writes."""
    with pg.connect(database) as conn:
        row = conn.execute(
            f"select count(*), coalesce(sum(hashtext(t::text)::bigint), 0) from (select {COLUMNS} from items) t"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def differences(pg: PostgresServer, source: str, target: str) -> str | None:
    """None when ``target.items`` holds the source's rows exactly, else what differs."""

    def rows(database: str) -> dict[Any, tuple[Any, ...]]:
        with pg.connect(database) as conn:
            return {row[0]: row for row in conn.execute(f"select {COLUMNS} from items order by id")}

    want, got = rows(source), rows(target)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    if not (missing or extra or changed):
        return None
    example = f"; e.g. id {changed[0]}: source {want[changed[0]]}, target {got[changed[0]]}" if changed else ""
    return (
        f"{len(got):,} rows against the source's {len(want):,}: {len(missing):,} missing (e.g. {missing[:3]}), "
        f"{len(extra):,} extra (e.g. {extra[:3]}), {len(changed):,} differ{example}"
    )


# --- Debezium's JDBC sink on Connect -------------------------------------------------------------


def jdbc_sink_config(
    pg: PostgresServer, database: str, topic: str, tasks: int, extra: dict[str, str]
) -> dict[str, Any]:
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": tasks,
        "topics": topic,
        "connection.url": f"jdbc:postgresql://{pg.host}:{pg.port}/{database}",
        "connection.username": pg.user,
        "connection.password": pg.password or "unused",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "none",
        "collection.name.format": "items",
        **SCHEMA_JSON,
        **extra,
    }


class SinkRun:
    """One JDBC sink connector: its health, and how far its consumer group committed."""

    def __init__(self, client: ConnectClient, bootstrap: str, name: str, topic: str) -> None:
        self.client, self.name, self.topic = client, name, topic
        self.total = sum(end_offsets(bootstrap, topic).values())
        # Connect's sink consumer group; fetching its offsets does not join it.
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"connect-{name}"})
        self.checked_at = 0.0

    def committed(self) -> int:
        """Records the sink has written and committed (Connect commits once a second here)."""
        parts = self.consumer.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=30)
        return sum(max(0, tp.offset) for tp in parts)

    def until(self, done: Callable[[], bool], poll: float = 0.25) -> None:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not done():
            if time.monotonic() - self.checked_at > 2:  # the worker being measured answers each call
                self.checked_at = time.monotonic()
                check_connector(self.client, self.name)
            if time.monotonic() > deadline:
                raise TimeoutError(f"JDBC sink {self.name}: not done within {RUN_TIMEOUT_S}s")
            time.sleep(poll)


def has_rows(pg: PostgresServer, database: str) -> bool:
    with pg.connect(database) as conn:
        return conn.execute("select exists (select from items)").fetchone()[0]  # type: ignore[index,no-any-return]


def run_jdbc_sink(
    client: ConnectClient, bootstrap: str, pg: PostgresServer, config: dict[str, Any], name: str, want: Any
) -> dict[str, Any]:
    """Create the connector and time it: ``seconds`` to target == source (None if it settled on
    something else: its offsets all committed and still no match ``SETTLE_S`` later),
    ``first_row_s``. ``want=None``: a warm-up, done once every offset is committed."""
    database, topic = config["connection.url"].rsplit("/", 1)[1], config["topics"]
    run = SinkRun(client, bootstrap, name, topic)
    started = time.perf_counter()
    client.create(name, config)
    try:
        if want is None:
            run.until(lambda: run.committed() >= run.total, poll=1.0)
            return {"seconds": time.perf_counter() - started}
        first: list[float] = []
        settled_at: list[float] = []

        def matches() -> bool:
            if not first and has_rows(pg, database):
                first.append(time.perf_counter() - started)
            committed = run.committed()
            # The fingerprint scans the table: only near the end (commits trail writes by <= 1 s).
            if committed < 0.9 * run.total:
                return False
            if fingerprint(pg, database) == want:
                return True
            if settled_at:
                return time.monotonic() - settled_at[0] > SETTLE_S
            if committed >= run.total:
                settled_at.append(time.monotonic())
            return False

        run.until(matches)
        seconds = time.perf_counter() - started
        return {"seconds": None if settled_at else seconds, "first_row_s": first[0] if first else None}
    finally:
        client.delete(name)
        run.consumer.close()


# --- our apply job ---------------------------------------------------------------------------------


def apply_job(pg: PostgresServer, bootstrap: str, database: str, topic: str, checkpoint: Path) -> Any:
    from airflow_cdc.spark.apply import ApplyJob
    from airflow_cdc.spark.reading import SourceOptions

    return ApplyJob(
        source=SourceOptions(kind="kafka", bootstrap_servers=bootstrap, topics=(topic,)),
        target_url=target_url(pg, database),
        checkpoint=str(checkpoint),
        table_map={"public.items": "public.items"},
    )


def run_ours(spark: Any, job: Any) -> dict[str, Any]:
    from airflow_cdc.spark.apply import run

    started = time.perf_counter()
    result = run(spark, job)
    return {
        "seconds": time.perf_counter() - started,
        "records": int(result["records"]),
        "batches": result["batches"],
        "phases_s": result.get("phases_s") or {},
    }


def run_ours_phases(spark: Any, job: Any) -> dict[str, Any]:
    """One run and the phases its batches report (``batches.py``: read, transform, write), with
    the rest of the run (query start, offsets, planning, commit) as ``outside``."""
    out = run_ours(spark, job)
    phases = {name: round(seconds, 2) for name, seconds in out.pop("phases_s").items()}
    phases["outside"] = round(out["seconds"] - sum(phases.values()), 2)
    return {**out, "phases": phases}
