"""Dropping the replication slots a test's consumer has just let go of."""

from __future__ import annotations

from typing import Any

import psycopg

from airflow_cdc.engine.testing import wait_until


def drop_slots(conn: psycopg.Connection[Any], where: str, params: tuple[Any, ...], timeout: float = 60) -> None:
    """Drop the slots of ``pg_replication_slots`` matching ``where``, retrying while one is in use.

    Seeing a slot inactive is not enough to drop it: a Connect task still starting when its
    connector was deleted opens its stream late (Connect reports RUNNING before Debezium's
    streaming starts), and the server ends a closed client's WAL sender on its own time. So each
    try that meets ``ObjectInUse`` means "not yet", until the deadline. Slot drops are not
    transactional: a try that fails half-way keeps the slots it dropped."""

    def dropped() -> bool:
        try:
            with conn.transaction():
                conn.execute(
                    f"select pg_drop_replication_slot(slot_name) from pg_replication_slots where {where}",
                    params,
                )
        except psycopg.errors.ObjectInUse:
            return False
        return True

    wait_until(dropped, timeout, f"the replication slots where {where} {params} released and dropped", interval=0.1)
