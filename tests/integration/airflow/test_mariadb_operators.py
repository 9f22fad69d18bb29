"""The operators and sensors against a real MariaDB (connector.class MariaDbConnector) and real
engine instances: an Airflow ``mysql`` connection becomes the instance's database.* keys, the
signal table is written over a connection whose user must give its password, the offset sensor
waits for a GTID position and for a binlog ``file:pos``, the offsets operator seeks to a GTID
position, and a bounded capture stops at one."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.operators.capture import CdcCaptureOperator
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from tests.integration.airflow.support import changelog, running, task_context

pytestmark = pytest.mark.integration

CDC_CONN, ROOT_CONN, USER_CONN = "cdc_maria", "maria_root", "maria_user"
#: A password that must appear in no XCom, log line or file the tests look at.
PASSWORD = f"pw-{uuid.uuid4().hex}"
USER = "airflow_cdc_tester"


class Maria:
    def __init__(self, server: MariaDBServer, database: str) -> None:
        self.server, self.database = server, database

    def execute(self, *statements: str) -> None:
        with self.server.connect(database=self.database) as conn, conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    def one(self, query: str) -> tuple[Any, ...]:
        with self.server.connect(database=self.database) as conn, conn.cursor() as cursor:
            cursor.execute(query)
            row = cursor.fetchone()
            assert row is not None
            return tuple(row)

    def gtid(self) -> str:
        return str(self.one("select @@gtid_binlog_pos")[0])

    def binlog_position(self) -> str:
        file, pos, *_ = self.one("show master status")
        return f"{file}:{pos}"


@pytest.fixture(scope="module")
def password_user(mariadb_server: MariaDBServer) -> Iterator[tuple[str, str]]:
    """``(user, password)`` of a user the server really asks a password of (an external server's
    own user otherwise), with the privileges CDC needs."""
    if mariadb_server.external:
        yield mariadb_server.user, mariadb_server.password
        return
    with mariadb_server.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"drop user if exists '{USER}'@'%'")
        cursor.execute(f"create user '{USER}'@'%' identified by '{PASSWORD}'")
        cursor.execute(f"grant select, insert, reload, replication slave, binlog monitor on *.* to '{USER}'@'%'")
    with pytest.raises(pymysql.OperationalError):  # the password is really asked for
        pymysql.connect(host=mariadb_server.host, port=mariadb_server.port, user=USER, password="").close()
    try:
        yield USER, PASSWORD
    finally:
        with mariadb_server.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"drop user if exists '{USER}'@'%'")


@pytest.fixture
def maria(mariadb_server: MariaDBServer, mariadb_database: str) -> Maria:
    """The captured database: ``orders`` (20 rows), ``customers`` (5 rows), the signal table."""
    source = Maria(mariadb_server, mariadb_database)
    source.execute(
        "create table orders (id int primary key, status varchar(20), updated_at date)",
        "insert into orders select seq, if(seq % 2 = 0, 'open', 'done'), date '2026-01-01' + interval seq day "
        "from seq_1_to_20",
        "create table customers (id int primary key, name varchar(40))",
        "insert into customers select seq, concat('c', seq) from seq_1_to_5",
        "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
    )
    return source


@pytest.fixture
def instance(
    tmp_path: Path, maria: Maria, password_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """An instance config file naming no server and no credential, and the connections:
    ``cdc_maria`` (the instance), ``maria_root`` (the test server's own user) and ``maria_user``
    (a user with a password); the instance is stopped after the test whatever happened."""
    db = maria.database
    config = {
        "name": f"maria-{db[-8:]}",
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": "shop",
        "database.server.id": 10_000 + uuid.uuid4().int % 1_000_000,
        "table.include.list": f"{db}.orders,{db}.customers",
        "signal.data.collection": f"{db}.debezium_signal",
        "state.dir": str(tmp_path / "state"),
        "api.token": f"tok-{uuid.uuid4().hex}",
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 100,
        "heartbeat.interval.ms": 500,
        "sink.type": "changelog",
        "sink.changelog.segment.max.ms": 100,
    }
    path = tmp_path / "maria.yaml"
    path.write_text(yaml.safe_dump(config))
    server = maria.server

    def mysql(login: str, password: str) -> str:
        return json.dumps(
            {
                "conn_type": "mysql",
                "host": server.host,
                "port": server.port,
                "login": login,
                "password": password,
                "schema": db,
            }
        )

    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CDC_CONN.upper()}",
        json.dumps({"conn_type": "cdc_engine", "password": config["api.token"], "extra": {"config_path": str(path)}}),
    )
    monkeypatch.setenv(f"AIRFLOW_CONN_{ROOT_CONN.upper()}", mysql(server.user, server.password))
    monkeypatch.setenv(f"AIRFLOW_CONN_{USER_CONN.upper()}", mysql(*password_user))
    props = {"name": config["name"], "state.dir": config["state.dir"]}
    try:
        yield props
    finally:
        control.stop(props, timeout=30)


def start(source_conn_id: str = ROOT_CONN, **config: Any) -> dict[str, Any]:
    operator = CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=source_conn_id, config=config or None, timeout=120
    )
    return operator.execute(task_context())


def stop() -> None:
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())


def wait_for(target: str) -> dict[str, Any]:
    sensor = CdcOffsetSensor(
        task_id="wait", cdc_conn_id=CDC_CONN, target=target, deferrable=False, poke_interval=0.2, timeout=60
    )
    reached: dict[str, Any] = sensor.execute(task_context())
    return reached


def ids(state_dir: str, database: str, table: str = "orders") -> list[int]:
    return [e["after"]["id"] for e in changelog(Path(state_dir), f"shop.{database}.{table}") if e["op"] != "d"]


def test_a_mysql_connection_gtid_and_binlog_targets_signals_and_a_gtid_seek(
    instance: dict[str, Any], maria: Maria
) -> None:
    started = start()
    assert started["phase"] == "streaming" and started["positions"][0]["partition"] == {"server": "shop"}
    db, state = maria.database, instance["state.dir"]
    wait_until(lambda: len(ids(state, db)) == 20, 60, "the initial snapshot delivered")
    running_config = json.dumps(started)
    assert PASSWORD not in running_config

    # An incremental snapshot whose signal goes into the signal table over a user with a password.
    snapshot = CdcSnapshotOperator(
        task_id="snapshot", cdc_conn_id=CDC_CONN, tables=[f"{db}.customers"], channel="source", source_conn_id=USER_CONN
    )
    signal_id = snapshot.execute(task_context())
    done = CdcSnapshotSensor(
        task_id="done", cdc_conn_id=CDC_CONN, signal_id=signal_id, deferrable=False, poke_interval=0.2, timeout=60
    ).execute(task_context())
    assert done["rows"] == {f"{db}.customers": 5}
    assert maria.one(f"select type from debezium_signal where id = '{signal_id}'") == ("execute-snapshot",)

    # A MariaDB GTID position as the target.
    maria.execute("insert into orders values (21, 'gtid', date '2026-03-01')")
    gtid = maria.gtid()
    reached = wait_for(gtid)
    assert reached["target"] == gtid and reached["positions"][0]["target"] == gtid
    assert 21 in ids(state, db)
    # A binlog file:pos as the target.
    maria.execute("insert into orders values (22, 'binlog', date '2026-03-02')")
    position = maria.binlog_position()
    assert wait_for(position)["target"] == position
    assert 22 in ids(state, db)
    # "current": the server's GTID position when the sensor started.
    maria.execute("update orders set status = 'current' where id = 1")
    current = wait_for("current")
    [task] = current["positions"]
    assert task["target"] and task["target"].count("-") == 2

    # Seek a stopped instance past a transaction, by GTID.
    stop()
    assert not running(instance)
    maria.execute("insert into orders values (101, 'skipped by the seek', date '2026-03-03')")
    skip_to = maria.gtid()
    moved = CdcOffsetsOperator(task_id="seek", cdc_conn_id=CDC_CONN, action="seek", position=skip_to).execute(
        task_context()
    )
    assert moved["position"] == skip_to and moved["offset"]["gtids"] == skip_to
    start()
    maria.execute("insert into orders values (102, 'after the seek', date '2026-03-04')")
    wait_until(lambda: 102 in ids(state, db), 60, "102 streamed")
    assert 101 not in ids(state, db)


def test_a_bounded_capture_over_a_password_user_stops_at_a_gtid_position(
    instance: dict[str, Any], maria: Maria
) -> None:
    db = maria.database
    maria.execute("insert into orders values (21, 'before the target', date '2026-03-01')")
    target = maria.gtid()
    captured = CdcCaptureOperator(
        task_id="capture", cdc_conn_id=CDC_CONN, source_conn_id=USER_CONN, target_position=target, max_duration=120
    ).execute(task_context())
    assert captured["stopped_by"] == "target_position"
    assert captured["rows"] == {f"{db}.orders": 21, f"{db}.customers": 5}
    [offset] = captured["offsets"]
    assert offset["partition"] == {"server": "shop"} and offset["position"] == target
    assert PASSWORD not in json.dumps(captured)

    maria.execute("update orders set status = 'next' where id = 1")
    following = maria.binlog_position()
    again = CdcCaptureOperator(
        task_id="capture", cdc_conn_id=CDC_CONN, source_conn_id=USER_CONN, target_position=following, max_duration=120
    ).execute(task_context())
    assert again["stopped_by"] == "target_position" and again["rows"] == {f"{db}.orders": 1}


def test_a_detached_instance_gets_the_password_of_a_mysql_connection(instance: dict[str, Any], maria: Maria) -> None:
    started = start(USER_CONN)
    assert started["phase"] == "streaming"
