"""The docker stack's databases and captures, on the test servers instead of containers: the init
SQL runs as the images' entrypoints run it, and then the stack's own credentials, engine instance
config and Debezium connector configs are used as they are, only their host names pointed at the
test servers (and their topics at a prefix of the test's own on the shared broker).

The stack names cluster-wide objects (roles, users, the ``shop`` databases) with fixed names, so
these tests run only on servers the tests started, never on an external one
(``CDC_TEST_PG_DSN`` / ``CDC_TEST_MYSQL_URL``); everything is dropped afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pymysql
import pytest
import yaml
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.hooks.source_config import engine_config, source_config
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.kafka_connect.client import validation_errors
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.unit.docker import stack

pytestmark = pytest.mark.integration

POSTGRES_INIT = stack.DOCKER / "postgres" / "init.sql"
MARIADB_INIT = stack.DOCKER / "mariadb" / "init.sql"
#: Debezium's signal table, column by column: (name, type, length, nullable).
SIGNAL_COLUMNS = [("id", "varchar", 42, False), ("type", "varchar", 32, False), ("data", "varchar", 2048, True)]


def _own(server: PostgresServer | MariaDBServer) -> None:
    if server.external:
        pytest.skip("the stack's init SQL creates roles and databases with fixed names: only on a server started here")


def _created(pattern: str, text: str) -> list[str]:
    return re.findall(pattern, text, flags=re.IGNORECASE | re.MULTILINE)


# --- PostgreSQL ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack_postgres(pg_server: PostgresServer) -> Iterator[PostgresServer]:
    """The test server after docker/postgres/init.sql, run as the postgres image's entrypoint runs
    it (psql, ON_ERROR_STOP, as the superuser, in POSTGRES_DB). Its roles log in with their
    passwords only (scram, as in the image), so a wrong password in the stack fails here."""
    _own(pg_server)
    text = POSTGRES_INIT.read_text()
    database = stack.environment("postgres")["POSTGRES_DB"]
    roles = _created(r"^create role (\w+)", text)
    databases = [database, *_created(r"^create database (\w+)", text)]
    assert roles and len(databases) == 3
    pg_server.create_database(database)
    hba = pg_server.data_dir / "pg_hba.conf"  # type: ignore[operator]
    original = hba.read_text()
    hba.write_text(f"host all {','.join(roles)} 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")
        done = subprocess.run(
            [
                str(pg_server.program("psql")),
                *("-v", "ON_ERROR_STOP=1", "--no-psqlrc", "--no-password"),
                *("-h", pg_server.host, "-p", str(pg_server.port), "-U", pg_server.user, "--dbname", database),
                *("-f", str(POSTGRES_INIT)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        yield pg_server
    finally:
        hba.write_text(original)
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")
        for name in databases:
            pg_server.drop_database(name)
        with pg_server.connect() as conn:
            for role in roles:
                conn.execute(f"drop role if exists {role}")


def connect_as(server: PostgresServer, conn_id: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """A connection with an Airflow connection of the stack, its host pointed at the test server."""
    conn = stack.connections()[conn_id]
    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=conn["login"],
        password=conn["password"],
        dbname=conn["schema"],
        connect_timeout=10,
        **kwargs,
    )


def columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str, int | None, bool]]:
    return [
        (name, "varchar" if kind == "character varying" else kind, length, nullable == "YES")
        for name, kind, length, nullable in conn.execute(
            "select column_name, data_type, character_maximum_length, is_nullable from information_schema.columns"
            " where table_schema = 'public' and table_name = %s order by ordinal_position",
            (table,),
        )
    ]


def primary_key(conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid"
            " and a.attnum = any(i.indkey) where i.indrelid = %s::regclass and i.indisprimary",
            (f"public.{table}",),
        )
    ]


def test_postgres_init_builds_the_shop_for_the_capturing_role(stack_postgres: PostgresServer) -> None:
    shop = load_config_file(stack.mounted_file("airflow", "/opt/airflow/cdc/shop.yaml"))
    with connect_as(stack_postgres, "pg_shop") as conn:
        assert conn.execute("select count(*) from customers").fetchone() == (100,)
        assert conn.execute("select count(*) from orders").fetchone() == (5000,)
        assert columns(conn, "debezium_signal") == SIGNAL_COLUMNS
        assert primary_key(conn, "debezium_signal") == ["id"]
        assert conn.execute(
            "select rolreplication, rolsuper from pg_roles where rolname = current_user"
        ).fetchone() == (
            True,
            False,
        )
        published = conn.execute(
            "select puballtables from pg_publication where pubname = %s", (shop["publication.name"],)
        )
        assert published.fetchone() == (True,)
        conn.execute("insert into debezium_signal values ('init-test', 'log', '{\"message\": \"hi\"}')")
        conn.execute("delete from debezium_signal where id = 'init-test'")
        conn.rollback()
    database = stack.environment("postgres")["POSTGRES_DB"]
    with stack_postgres.connect(database) as conn, conn.transaction(force_rollback=True):
        # The trigger example_snapshot_backfill relies on: an update moves updated_at to now().
        touched = conn.execute("update orders set status = 'open' where id = 7 returning updated_at = now()")
        assert touched.fetchone() == (True,)


def test_postgres_roles_log_in_only_with_their_password(stack_postgres: PostgresServer) -> None:
    """The check that makes the logins of the other tests prove the stack's passwords."""
    conn = stack.connections()["pg_shop"]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=stack_postgres.host,
            port=stack_postgres.port,
            user=conn["login"],
            password=conn["password"] + "-wrong",
            dbname=conn["schema"],
            connect_timeout=10,
        ).close()


def test_postgres_init_builds_the_replica_for_the_apply_job(stack_postgres: PostgresServer) -> None:
    with connect_as(stack_postgres, "pg_shop") as source, connect_as(stack_postgres, "pg_shop_replica") as replica:
        for table in ("customers", "orders"):
            wanted = [(name, kind, length, nullable) for name, kind, length, nullable in columns(source, table)]
            assert columns(replica, table) == wanted, table
            assert primary_key(replica, table) == primary_key(source, table) == ["id"]
            assert replica.execute(f"select count(*) from {table}").fetchone() == (0,)
            # The job adds its _cdc_position column: the role must own the tables.
            replica.execute(f"alter table {table} add column _cdc_position text")
        replica.rollback()


def test_postgres_init_builds_airflows_metadata_database(stack_postgres: PostgresServer) -> None:
    url = urlsplit(stack.environment("airflow")["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert (url.hostname, url.port) == ("postgres", 5432)
    with psycopg.connect(
        host=stack_postgres.host,
        port=stack_postgres.port,
        user=url.username,
        password=url.password,
        dbname=url.path.lstrip("/"),
        connect_timeout=10,
    ) as conn:
        conn.execute("create table migrations_may_create_tables (id int)")
        conn.rollback()


def test_the_postgres_server_settings_of_the_stack_are_valid(pg_server: PostgresServer) -> None:
    command = stack.services()["postgres"]["command"]
    assert command[0] == "postgres"
    settings = dict(
        value.split("=", 1) for flag, value in zip(command[1::2], command[2::2], strict=True) if flag == "-c"
    )
    assert len(settings) * 2 == len(command) - 1
    assert settings["wal_level"] == "logical"
    with pg_server.connect() as conn:
        for name, value in settings.items():
            row = conn.execute("select vartype, enumvals, min_val, max_val from pg_settings where name = %s", (name,))
            found = row.fetchone()
            assert found, f"PostgreSQL has no setting {name}"
            kind, choices, low, high = found
            if kind == "enum":
                assert value in choices, f"{name}={value}: not one of {choices}"
            elif kind == "integer":
                assert int(low) <= int(value) <= int(high), f"{name}={value}: outside {low}..{high}"


# --- MariaDB -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack_mariadb(mariadb_server: MariaDBServer) -> Iterator[MariaDBServer]:
    """The test server after docker/mariadb/init.sql, run as the mariadb image's entrypoint runs
    it (the mariadb client, as root, in MARIADB_DATABASE)."""
    _own(mariadb_server)
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        pytest.skip("no mariadb client program (install mariadb-client)")
    database = stack.environment("mariadb")["MARIADB_DATABASE"]
    users = _created(r"^create user ('\w+'@'[^']+')", MARIADB_INIT.read_text())
    assert users
    mariadb_server.create_database(database)
    try:
        with MARIADB_INIT.open("rb") as sql:
            done = subprocess.run(
                [
                    *(client, "--no-defaults", "-h", mariadb_server.host, "-P", str(mariadb_server.port)),
                    *("-u", mariadb_server.user, f"--database={database}"),
                ],
                stdin=sql,
                capture_output=True,
                timeout=120,
                env={**os.environ, "MYSQL_PWD": mariadb_server.password},
            )
        assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
        yield mariadb_server
    finally:
        mariadb_server.drop_database(database)
        mariadb_server.drop_database("shop_replica")
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            for user in users:
                cur.execute(f"drop user if exists {user}")


def test_mariadb_init_builds_the_shop_for_the_capturing_user(stack_mariadb: MariaDBServer) -> None:
    config = json.loads((stack.DOCKER / "connect" / "shop-mariadb.json").read_text())["config"]
    password = resolve_providers(config)["database.password"]
    database = stack.environment("mariadb")["MARIADB_DATABASE"]
    assert config["database.include.list"] == database
    with (
        pymysql.connect(
            host=stack_mariadb.host,
            port=stack_mariadb.port,
            user=config["database.user"],
            password=password,
            database=database,
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("select count(*) from customers")
        assert cur.fetchone() == (100,)
        cur.execute("select count(*) from orders")
        assert cur.fetchone() == (5000,)
        cur.execute(
            "select column_name, data_type, character_maximum_length, is_nullable = 'YES' from"
            " information_schema.columns where table_schema = %s and table_name = 'debezium_signal'"
            " order by ordinal_position",
            (database,),
        )
        assert [(n, t, length, bool(null)) for n, t, length, null in cur.fetchall()] == SIGNAL_COLUMNS
        cur.execute("show grants")
        grants = " ".join(row[0] for row in cur.fetchall()).upper()
        for privilege in ("SELECT", "RELOAD", "REPLICATION SLAVE", "LOCK TABLES"):
            assert privilege in grants, f"{privilege} not in {grants}"
        cur.execute("show binary logs")  # what the connector needs REPLICATION CLIENT (BINLOG MONITOR) for
        cur.execute("insert into debezium_signal values ('init-test', 'log', '{}')")
        cur.execute("delete from debezium_signal where id = 'init-test'")
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        pymysql.connect(
            host=stack_mariadb.host, port=stack_mariadb.port, user=config["database.user"], password=password + "x"
        ).close()


def test_mariadb_init_builds_the_replica_for_the_apply_job(stack_mariadb: MariaDBServer) -> None:
    """What example_mariadb_capture's Spark job needs of mariadb_shop_replica: the source's
    columns and keys, empty, and the right to add its ``_cdc_position`` column and write."""
    conn_ids = stack.connections()
    replica_conn = conn_ids["mariadb_shop_replica"]
    source_database = stack.environment("mariadb")["MARIADB_DATABASE"]

    def shape(cur: Any, database: str, table: str) -> list[tuple[Any, ...]]:
        cur.execute(
            "select column_name, column_type, is_nullable, column_key = 'PRI' from information_schema.columns"
            " where table_schema = %s and table_name = %s order by ordinal_position",
            (database, table),
        )
        return list(cur.fetchall())

    with (
        pymysql.connect(
            host=stack_mariadb.host,
            port=stack_mariadb.port,
            user=replica_conn["login"],
            password=replica_conn["password"],
            database=replica_conn["schema"],
            autocommit=True,
        ) as replica,
        replica.cursor() as cur,
        stack_mariadb.connect() as root,
        root.cursor() as source,
    ):
        for table in ("customers", "orders"):
            assert shape(cur, replica_conn["schema"], table) == shape(source, source_database, table), table
            cur.execute(f"select count(*) from {table}")
            assert cur.fetchone() == (0,)
        cur.execute("alter table orders add column _cdc_position varchar(64)")
        cur.execute("insert into orders values (1, 1, 'open', 1.00, now(6), '1')")
        cur.execute("delete from orders")
        cur.execute("alter table orders drop column _cdc_position")


def test_the_mariadb_server_options_of_the_stack_are_accepted(mariadb_server: MariaDBServer) -> None:
    """mariadbd parses the compose file's options and reports them back as set (an unknown option
    or value makes it exit non-zero)."""
    if mariadb_server.binary is None:
        pytest.skip("no mariadbd program (install mariadb-server)")
    options = stack.services()["mariadb"]["command"]
    done = subprocess.run(
        [str(mariadb_server.binary), "--no-defaults", *options, "--verbose", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reported = dict(line.split(None, 1) for line in done.stdout.splitlines() if len(line.split(None, 1)) == 2)
    aliases = {"ON": "TRUE", "OFF": "FALSE"}
    for option in options:
        name, _, value = option.removeprefix("--").partition("=")
        assert reported.get(name, "").strip() == aliases.get(value, value), f"{option}: {reported.get(name)!r}"


# --- the images' Maven stages --------------------------------------------------------------------


def maven_stages(dockerfile: Path) -> Iterator[tuple[str, list[str]]]:
    """``(mvn command, [what later stages copy out of that stage])`` for each Maven stage."""
    stage, commands, copied = None, {}, {}
    for instruction in stack.instructions(dockerfile):
        if instruction.keyword == "FROM":
            stage = instruction.arguments.split()[-1]
        elif instruction.keyword == "RUN" and instruction.arguments.startswith("mvn "):
            commands[stage] = instruction.arguments
        elif instruction.keyword == "COPY" and instruction.arguments.startswith("--from="):
            source_stage, source = instruction.arguments.removeprefix("--from=").split()[:2]
            copied.setdefault(source_stage, []).append(source)
    for name, command in commands.items():
        yield command, copied.get(name, [])


@pytest.mark.parametrize("dockerfile", sorted(stack.DOCKER.glob("*/Dockerfile")), ids=lambda p: p.parent.name)
def test_a_maven_stage_produces_the_jars_the_image_copies(dockerfile: Path, tmp_path: Path) -> None:
    """The stage's own command, offline against the Maven repository scripts/setup filled, from
    the repository root (the stage's copy of jvm/), into a scratch directory for its /jars."""
    if shutil.which("mvn") is None:
        pytest.skip("no mvn (bash scripts/setup installs Maven)")
    stages = list(maven_stages(dockerfile))
    assert stages
    for command, copied in stages:
        assert copied and all(source.startswith("/jars/") for source in copied), copied
        local = command.replace("mvn ", "mvn -o ", 1).replace("-Dcdc.jars=/jars", f"-Dcdc.jars={tmp_path}")
        done = subprocess.run(["bash", "-c", local], cwd=stack.ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        for source in copied:
            produced = tmp_path / source.removeprefix("/jars/")
            assert any(produced.rglob("*.jar")), f"{dockerfile.parent.name}: {source} holds no jar"


# --- the captures --------------------------------------------------------------------------------


def resolve_providers(config: dict[str, str]) -> dict[str, str]:
    """``${env:NAME}`` in a connector config, read from the connect service's environment as the
    worker's EnvVarConfigProvider reads its own."""
    env = stack.environment("connect")
    return {key: re.sub(r"\$\{env:(\w+)\}", lambda m: env[m.group(1)], value) for key, value in config.items()}


def read_topic(
    broker: KafkaBroker,
    topic: str,
    done: Callable[[list[Any]], bool],
    timeout: float = 120,
    alive: Callable[[], None] = lambda: None,
) -> list[Any]:
    """The JSON values of ``topic`` from its beginning, read until ``done(values)``; ``alive()``
    raises, between polls, when what writes the topic has failed."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    values: list[Any] = []
    try:
        wait_until(lambda: topic in consumer.topics(), timeout, f"topic {topic}", 0.1)
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout
        while not done(values):
            assert time.monotonic() < deadline, f"{topic}: {len(values)} records after {timeout}s"
            alive()
            for batch in consumer.poll(timeout_ms=200).values():
                values += [None if record.value is None else json.loads(record.value) for record in batch]
    finally:
        consumer.close()
    return values


def keys_read(values: list[Any], op: str = "r") -> set[Any]:
    return {v["after"]["id"] for v in values if v and v["op"] == op}


def signal_snapshot(server: PostgresServer, signal_id: str, tables: list[str]) -> None:
    """An incremental snapshot through the signal table, written as the capturing role."""
    data = json.dumps({"data-collections": tables, "type": "incremental"})
    with connect_as(server, "pg_shop", autocommit=True) as conn:
        conn.execute("insert into debezium_signal values (%s, 'execute-snapshot', %s)", (signal_id, data))


def test_the_shop_instance_captures_the_stacks_database_into_kafka(
    stack_postgres: PostgresServer, kafka_broker: KafkaBroker, topic_prefix: str, tmp_path: Path
) -> None:
    """docker/cdc/shop.yaml with the pg_shop connection laid over it as CdcStartEngineOperator
    lays it (its password in the instance's environment): starts, streams, runs an incremental
    snapshot signalled through the signal table, delivers it to Kafka, stops dropping its slot."""
    conn = stack.connections()["pg_shop"]
    source = source_config(
        "pg_shop",
        conn_type=conn["conn_type"],
        host=stack_postgres.host,
        port=stack_postgres.port,
        login=conn["login"],
        password=conn["password"],
        schema=conn["schema"],
    )
    config = engine_config(load_config_file(stack.mounted_file("airflow", "/opt/airflow/cdc/shop.yaml")), source=source)
    config.update(
        {
            "state.dir": str(tmp_path / "state"),
            "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers,
            "topic.prefix": topic_prefix,
        }
    )
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(config))
    props = load_config_file(path)
    try:
        control.start_detached(path, props, timeout=120, env=source.environment())
        signal_snapshot(stack_postgres, "docker-stack-1", ["public.orders", "public.customers"])
        with control.client_for(props) as client:
            seen: list[Any] = []

            def finished() -> bool:
                page = client.notifications(seen[-1].cursor if seen else None)
                seen.append(page)
                types = {n.type for p in seen for n in p.notifications if n.id == "docker-stack-1"}
                assert "ABORTED" not in types, types
                return "COMPLETED" in types

            wait_until(finished, 180, "the incremental snapshot's COMPLETED notification", 0.2)
        with stack_postgres.connect(conn["schema"]) as db:
            db.execute("update customers set name = 'renamed' where id = 1")
        orders = read_topic(kafka_broker, f"{topic_prefix}.public.orders", lambda v: len(keys_read(v)) >= 5000)
        assert keys_read(orders) == set(range(1, 5001))
        customers = read_topic(kafka_broker, f"{topic_prefix}.public.customers", lambda v: bool(keys_read(v, "u")))
        assert keys_read(customers) == set(range(1, 101)) and keys_read(customers, "u") == {1}
        stopped = control.stop(props, timeout=60)
        assert stopped and stopped["state"] == "STOPPED"
        with stack_postgres.connect() as db:
            slots = db.execute("select count(*) from pg_replication_slots where slot_name = %s", (config["slot.name"],))
            assert slots.fetchone() == (0,)  # slot.drop.on.stop, for example_cdc_teardown
    finally:
        control.stop(props, timeout=60)


def running(connect: ConnectClient, name: str) -> Callable[[], None]:
    """A check that fails as soon as the connector or one of its tasks has failed."""

    def check() -> None:
        failures = connect.status(name).failures
        assert not failures, failures

    return check


def slot_active(server: PostgresServer, slot: str) -> bool:
    with server.connect() as conn:
        row = conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()
    return bool(row and row[0])


def connector_config(name: str, **overrides: str) -> tuple[str, dict[str, str]]:
    data = json.loads((stack.DOCKER / "connect" / name).read_text())
    return data["name"], {**resolve_providers(data["config"]), **overrides}


def test_the_debezium_postgres_connector_captures_the_stacks_database(
    stack_postgres: PostgresServer, kafka_broker: KafkaBroker, connect: ConnectClient, topic_prefix: str
) -> None:
    """connect/shop-postgres.json on the test Connect worker: valid, runs as the cdc role, and an
    incremental snapshot signalled through the signal table (Debezium writes its watermarks
    there) delivers every customer."""
    name, config = connector_config(
        "shop-postgres.json",
        **{
            "database.hostname": stack_postgres.host,
            "database.port": str(stack_postgres.port),
            "topic.prefix": topic_prefix,
        },
    )
    answer = connect.validate(config["connector.class"], config)
    assert answer["error_count"] == 0, validation_errors(answer)
    name = f"{topic_prefix}-{name}"
    connect.create(name, config)
    connect.wait_running(name, timeout=120)
    # The signal is read from the stream: write it once the connector's slot streams.
    wait_until(lambda: slot_active(stack_postgres, config["slot.name"]), 120, "Debezium's slot streaming", 0.1)
    signal_snapshot(stack_postgres, "docker-dbz-1", ["public.customers"])
    customers = read_topic(
        kafka_broker,
        f"{topic_prefix}.public.customers",
        lambda v: len(keys_read(v)) >= 100,
        alive=running(connect, name),
    )
    assert keys_read(customers) == set(range(1, 101))


def test_the_debezium_mariadb_connector_captures_the_stacks_database(
    stack_mariadb: MariaDBServer, kafka_broker: KafkaBroker, connect: ConnectClient, topic_prefix: str
) -> None:
    """connect/shop-mariadb.json on the test Connect worker: valid, and its initial snapshot, run
    as the cdc user, delivers every customer and order."""
    name, config = connector_config(
        "shop-mariadb.json",
        **{
            "database.hostname": stack_mariadb.host,
            "database.port": str(stack_mariadb.port),
            "topic.prefix": topic_prefix,
            "schema.history.internal.kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
            "schema.history.internal.kafka.topic": f"{topic_prefix}.schema-history",
        },
    )
    answer = connect.validate(config["connector.class"], config)
    assert answer["error_count"] == 0, validation_errors(answer)
    name = f"{topic_prefix}-{name}"
    connect.create(name, config)
    connect.wait_running(name, timeout=120)
    database = config["database.include.list"]
    alive = running(connect, name)
    orders = read_topic(
        kafka_broker, f"{topic_prefix}.{database}.orders", lambda v: len(keys_read(v)) >= 5000, alive=alive
    )
    assert keys_read(orders) == set(range(1, 5001))
    # Then it follows the binlog (as a replica: REPLICATION SLAVE).
    with stack_mariadb.connect(database=database) as conn, conn.cursor() as cur:
        cur.execute("update customers set name = 'renamed' where id = 1")
    customers = read_topic(
        kafka_broker, f"{topic_prefix}.{database}.customers", lambda v: bool(keys_read(v, "u")), alive=alive
    )
    assert keys_read(customers) == set(range(1, 101)) and keys_read(customers, "u") == {1}
