"""``dags/example_mariadb_capture.py`` with ``dag.test()`` against a real MariaDB and a real engine
instance: the snapshot's signal goes through the signal table, rows change while it runs, the
offset sensor waits for the GTID position the server stood at, and the captured events' final
image (the last change per key, values decoded from Debezium's encodings) equals the source row
by row; then the DAG's Spark job applies them into a replica database, which equals the source
row by row too."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger
from tests.system.conftest import TOKEN, MariaSource
from tests.system.support import Instance, asset_events, load_dag, task_states, xcom

pytestmark = pytest.mark.integration


def decoded(table: str, after: dict[str, Any]) -> dict[str, Any]:
    """A change event's row with Debezium's MySQL encodings read back: ``decimal(10,2)`` as
    base64 of the unscaled big-endian integer (precise mode), ``datetime(3)`` as epoch milliseconds."""
    row = dict(after)
    if table == "orders":
        row["amount"] = Decimal(int.from_bytes(base64.b64decode(row["amount"]), "big", signed=True)).scaleb(-2)
        row["updated_at"] = datetime(1970, 1, 1) + timedelta(milliseconds=row["updated_at"])
    return row


def final_image(instance: Instance, topic: str) -> dict[int, dict[str, Any]]:
    """The table as the changelog's events leave it (last change per key), values decoded."""
    table = topic.rsplit(".", 1)[1]
    state: dict[int, dict[str, Any]] = {}
    for record in instance.changelog(topic):
        value = record["value"]
        if value is None or value["op"] == "d":
            state.pop(record["key"]["id"], None)
        else:
            state[record["key"]["id"]] = decoded(table, value["after"])
    return state


def test_mariadb_capture_snapshots_through_the_signal_table_and_applies_every_row(
    maria_shop: Instance,
    maria_source: MariaSource,
    maria_replica: MariaSource,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = maria_source.database
    orders_topic, customers_topic = f"shop_mariadb.{database}.orders", f"shop_mariadb.{database}.customers"
    # Rows change while the snapshot runs (streamed meanwhile): at the snapshot sensor's first look.
    check = CdcSnapshotTrigger.check
    looks: list[dict[str, Any] | None] = []

    async def observed(self: CdcSnapshotTrigger, client: Any) -> dict[str, Any] | None:
        if not looks:
            maria_source.execute(
                "update orders set status = 'changed', amount = amount + 0.01 where id % 100 = 0",
                "delete from orders where id between 1001 and 1005",
                "insert into orders select seq, 'new', 9.99, timestamp '2026-02-01 12:00:00.125' from seq_3001_to_3010",
                "update customers set name = 'renamed' where id = 7",
            )
        payload = await check(self, client)
        looks.append(payload)
        return payload

    monkeypatch.setattr(CdcSnapshotTrigger, "check", observed)

    run = load_dag("example_mariadb_capture").test()

    states = task_states(run)
    assert set(states.values()) == {"success"}, (states, maria_shop.log())
    assert looks and looks[-1] is not None and looks[-1]["status"] == "success"

    started = xcom(run, "start_engine")
    assert started["started"] is True and started["phase"] == "streaming"
    signal_id = xcom(run, "snapshot")
    done = xcom(run, "snapshot_done")
    assert done["signal_id"] == signal_id
    assert done["rows"][f"{database}.customers"] == 50
    assert 0 < done["rows"][f"{database}.orders"] <= 2010
    # The signal went through the signal table (the source channel), over mariadb_shop.
    assert maria_source.scalar(f"select count(*) from debezium_signal where id = '{signal_id}'") == 1

    events = {uri: extra for uri, extra, _ in asset_events(run)}
    assert set(events) == {f"cdc://shop_mariadb/{database}.orders", f"cdc://shop_mariadb/{database}.customers"}
    assert events[f"cdc://shop_mariadb/{database}.customers"]["rows"] == 50

    # "current" was the server's GTID position (domain-server-sequence), and it was reached.
    caught_up = xcom(run, "caught_up")
    assert caught_up["target"] == "current"
    [position] = caught_up["positions"]
    assert position["partition"] == {"server": "shop_mariadb"}
    assert re.fullmatch(r"0-1-\d+", position["target"]) and position["committed"]  # domain 0, server 1

    # Snapshot and stream together leave the tables as the source has them, row by row.
    orders = maria_source.rows("orders")
    assert len(orders) == 2005 and orders[100]["status"] == "changed" and 1001 not in orders
    assert final_image(maria_shop, orders_topic) == orders
    assert final_image(maria_shop, customers_topic) == maria_source.rows("customers")
    reads = [r["value"] for r in maria_shop.changelog(customers_topic) if r["value"] and r["value"]["op"] == "r"]
    assert len(reads) == 50 and {r["source"]["snapshot"] for r in reads} == {"incremental"}

    # The Spark job applied all of it: the replica equals the source row by row.
    applied = xcom(run, "apply_changes")
    assert applied["records"] >= 2060 and applied["batches"] >= 1, applied
    assert without_position(maria_replica.rows("orders")) == orders
    assert without_position(maria_replica.rows("customers")) == maria_source.rows("customers")
    assert TOKEN not in json.dumps([started, done, caught_up, events, applied, capfd.readouterr()], default=str)


def without_position(rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The rows without the replay guard's column the job added."""
    return {key: {k: v for k, v in row.items() if k != "_cdc_position"} for key, row in rows.items()}
