"""CdcValidateOperator's arguments are checked when the DAG is parsed; the repair's snapshot
filter and the apply job's default target names, without a server."""

from __future__ import annotations

import pytest

from airflow_cdc.drift import Drift, KeyRange, key_runs, snapshot_filter
from airflow_cdc.drift.dialects import MysqlDialect, PostgresDialect, dialect_for
from airflow_cdc.drift.errors import DriftError
from airflow_cdc.operators.validate import CdcValidateOperator

CONNS = {"source_conn_id": "pg_shop", "target_conn_id": "pg_shop_replica"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": "orders"}, "schema.table"),
        ({"table": "public.orders", "max_keys": 0}, "max_keys"),
        ({"table": "public.orders", "ranges": 0}, "ranges"),
        ({"table": "public.orders", "repair_rounds": 0}, "repair_rounds"),
        ({"table": "public.orders", "channel": "carrier-pigeon"}, "channel"),
        ({"table": "public.orders", "target_url": "delta:/lake"}, "target_conn_id .* or target_url"),
    ],
)
def test_bad_arguments_fail_at_parse_time(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CdcValidateOperator(task_id="validate", **CONNS, **kwargs)  # type: ignore[arg-type]


def test_keys_become_runs_and_one_predicate() -> None:
    assert key_runs([7, 1, 2, 3, 9, 8]) == [KeyRange(1, 3), KeyRange(7, 9)]
    drift = Drift("public.orders", "public.orders", "id", missing=[5], different=[1, 2, 3], extra=[99])
    drift.truncated = [KeyRange(1000, 1999)]
    assert snapshot_filter(drift, '"id"') == '"id" in (5) or "id" between 1 and 3 or "id" between 1000 and 1999'


def test_the_default_target_is_the_apply_jobs() -> None:
    assert PostgresDialect().target_name("public.orders", "postgresql://u@h/replica") == "public.orders"
    assert MysqlDialect().target_name("shop.orders", "mysql://u:p@h:3306/shop_replica") == "shop_replica.orders"
    assert isinstance(dialect_for("mariadb://h/db"), MysqlDialect)
    with pytest.raises(DriftError, match="postgresql:// or mysql://"):
        dialect_for("delta:/tmp/x")
