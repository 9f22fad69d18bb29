"""The schema change policies on real PostgreSQL and MariaDB targets, batch by batch: records
with Connect schemas built here as Debezium writes them (``{"schema": ..., "payload": ...}``)
go through the job's own batch writer, so each case is exact - which schema version each row
was written with, what the target had before.

- A row decodes by the schema it was written with: a Decimal of the old scale in the same batch
  as the widening ``numeric(10,2) -> numeric(20,4)``.
- ``lenient``: a change the target cannot take (``text -> integer``) stops the batch with a
  message naming table, column, both types and the fix; nothing of the batch is written.
- ``ignore``: the job goes on, and the log names each ignored column once.
- ``exception``: no table created, no column added - today's messages.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.apply import ApplyJob
from airflow_cdc.spark.batches import Totals, batch_writer
from airflow_cdc.spark.frames import RAW_SCHEMA
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.targets.sql import TargetSchemaError, clear_catalog_cache
from tests.integration.spark.test_sql_targets import mysql_url

pytestmark = pytest.mark.integration

TOPIC = "p.public.t"


def column(field: str, type_: str = "int32", optional: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "optional": optional, **extra, "field": field}


def decimal(name: str, precision: int, scale: int) -> dict[str, Any]:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return column(name, "bytes", name="org.apache.kafka.connect.data.Decimal", version=1, parameters=parameters)


def unscaled(value: str, scale: int) -> str:
    number = int(Decimal(value).scaleb(scale))
    return base64.b64encode(number.to_bytes(8, "big", signed=True)).decode()


def record(columns: list[dict[str, Any]], op: str, after: dict[str, Any] | None, lsn: int) -> tuple[str, str]:
    """A key and value as Connect's JsonConverter writes a Debezium PostgreSQL event with schemas."""
    row = {"type": "struct", "fields": columns, "optional": True, "name": "p.public.t.Value"}
    source = {"type": "struct", "fields": [], "optional": False, "name": "io.debezium.connector.postgresql.Source"}
    envelope = {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {**source, "field": "source"},
            column("op", "string", optional=False),
        ],
        "optional": False,
        "name": "p.public.t.Envelope",
        "version": 2,
    }
    key_schema = {
        "type": "struct",
        "fields": [column("id", optional=False)],
        "optional": False,
        "name": "p.public.t.Key",
    }
    ident = (after or {}).get("id")
    payload = {
        "before": None,
        "after": after,
        "source": {"db": "db", "schema": "public", "table": "t", "lsn": lsn, "sequence": f'[null,"{lsn}"]'},
        "op": op,
    }
    key = json.dumps({"schema": key_schema, "payload": {"id": ident}}, separators=(",", ":"))
    return key, json.dumps({"schema": envelope, "payload": payload}, separators=(",", ":"))


class Target:
    def __init__(self, kind: str, url: str, connect: Any, table: str) -> None:
        self.kind, self.url, self._connect, self.table = kind, url, connect, table

    def rows(self, columns: str = "*") -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            if self.kind == "postgresql":
                return list(conn.execute(f"select {columns} from {self.table} order by 1").fetchall())
            with conn.cursor() as cur:
                cur.execute(f"select {columns} from {self.table} order by 1")
                return list(cur.fetchall())

    def type_of(self, name: str) -> str:
        schema, table = self.table.split(".")
        with self._connect() as conn:
            query = (
                "select data_type from information_schema.columns where table_schema = %s and table_name = %s "
                "and column_name = %s"
            )
            if self.kind == "postgresql":
                found = conn.execute(query, (schema, table, name)).fetchone()
            else:
                with conn.cursor() as cur:
                    cur.execute(query, (schema, table, name))
                    found = cur.fetchone()
        return str(found[0]) if found else ""


@pytest.fixture(params=["postgresql", "mariadb"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    clear_catalog_cache()
    if request.param == "postgresql":
        import psycopg

        server = request.getfixturevalue("pg_server")
        database = request.getfixturevalue("pg_database")
        dsn = server.dsn(database)
        yield Target("postgresql", _pg_url(server, database), lambda: psycopg.connect(dsn), "public.t")
        return
    server = request.getfixturevalue("mariadb_server")
    database = request.getfixturevalue("mariadb_database")
    yield Target("mariadb", mysql_url(server, database), lambda: server.connect(database=database), f"{database}.t")


def _pg_url(server: Any, database: str) -> str:
    from urllib.parse import quote

    password = f":{quote(server.password, safe='')}" if getattr(server, "password", None) else ""
    return f"postgresql://{quote(server.user, safe='')}{password}@{server.host}:{server.port}/{database}"


def writer(spark: Any, target: Target, tmp_path: Path, policy: str) -> Any:
    table_map = {"public.t": target.table} if target.kind == "mariadb" else {}
    job = ApplyJob(
        source=SourceOptions(kind="kafka", topics=(TOPIC,)),
        target_url=target.url,
        checkpoint=str(tmp_path / "checkpoint"),
        table_map=table_map,
        schema_change_policy=policy,
    )
    write = batch_writer(job, Totals())
    batches = iter(range(100))

    def apply(records: list[tuple[str, str]]) -> None:
        rows = [(TOPIC, 0, offset, key, value) for offset, (key, value) in enumerate(records)]
        write(spark.createDataFrame(rows, RAW_SCHEMA), next(batches))

    return apply


V1 = [column("id", optional=False), column("name", "string"), decimal("amount", 10, 2)]


def test_each_row_decodes_by_the_scale_of_its_own_schema(spark: Any, target: Target, tmp_path: Path) -> None:
    apply = writer(spark, target, tmp_path, "lenient")
    apply([record(V1, "r", {"id": i, "name": f"n{i}", "amount": unscaled("1.5", 2)}, 0) for i in (1, 2, 3)])
    assert target.type_of("amount") in ("numeric", "decimal")
    v2 = [column("id", optional=False), column("name", "string"), decimal("amount", 20, 4)]
    apply(
        [
            record(V1, "u", {"id": 1, "name": "n1", "amount": unscaled("15.25", 2)}, 10),  # before the ALTER
            record(v2, "u", {"id": 2, "name": "n2", "amount": unscaled("1234567890.1234", 4)}, 20),  # after it
        ]
    )
    amounts = {row[0]: str(row[1]) for row in target.rows("id, amount")}
    assert amounts == {1: "15.2500", 2: "1234567890.1234", 3: "1.5000"}


def test_a_change_the_target_cannot_take_stops_the_batch_under_lenient(
    spark: Any, target: Target, tmp_path: Path
) -> None:
    apply = writer(spark, target, tmp_path, "lenient")
    apply([record(V1, "r", {"id": 1, "name": "one", "amount": unscaled("1", 2)}, 0)])
    v2 = [column("id", optional=False), column("name", "int32"), decimal("amount", 10, 2)]
    with pytest.raises(TargetSchemaError) as refused:
        apply(
            [
                record(V1, "u", {"id": 1, "name": "uno", "amount": unscaled("2", 2)}, 10),
                record(v2, "c", {"id": 2, "name": 5, "amount": unscaled("3", 2)}, 20),
            ]
        )
    message = str(refused.value)
    for part in (
        "public.t",
        "column name",
        "text",
        "integer" if target.kind == "postgresql" else "int",
        "Nothing of this batch was applied",
    ):
        assert part.lower() in message.lower(), message
    assert "ALTER" in message and "schema_change_policy='ignore'" in message
    assert target.rows("id, name") == [(1, "one")]  # nothing of the refused batch


def test_ignore_goes_on_and_names_each_ignored_column_once(
    spark: Any, target: Target, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apply = writer(spark, target, tmp_path, "ignore")
    apply([record(V1, "r", {"id": 1, "name": "one", "amount": unscaled("1", 2)}, 0)])
    v2 = [*V1, column("extra", "string")]
    caplog.set_level(logging.WARNING)
    for batch in range(2):
        apply([record(v2, "c", {"id": 10 + batch, "name": "x", "amount": unscaled("1", 2), "extra": "e"}, 10 + batch)])
    assert [r[0] for r in target.rows("id")] == [1, 10, 11]
    named = [r for r in caplog.records if "extra" in r.getMessage() and "ignore" in r.getMessage()]
    assert len(named) == 1, [r.getMessage() for r in named]
    assert target.type_of("extra") == ""  # not added


def test_exception_creates_nothing_and_adds_nothing(spark: Any, target: Target, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist"):  # before the stream (a named table) or at its batch
        apply = writer(spark, target, tmp_path, "exception")
        apply([record(V1, "r", {"id": 1, "name": "one", "amount": unscaled("1", 2)}, 0)])
    lenient = writer(spark, target, tmp_path / "2", "lenient")
    lenient([record(V1, "r", {"id": 1, "name": "one", "amount": unscaled("1", 2)}, 0)])
    apply = writer(spark, target, tmp_path / "3", "exception")
    with pytest.raises(TargetSchemaError, match=r"lacks the column\(s\) extra"):
        apply([record([*V1, column("extra", "string")], "u", {"id": 1, "name": "a", "amount": None, "extra": "e"}, 5)])
