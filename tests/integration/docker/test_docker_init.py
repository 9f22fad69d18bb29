"""The docker stack's databases on the test servers instead of containers: the init SQL runs as
the images' entrypoints run it (conftest.py), and the stack's own credentials are used as they
are; the server settings of the stack are accepted; the images' Maven stages build the jars they
copy. The captures are in test_stack_captures.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pymysql
import pytest

from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.integration.docker.stack_support import columns, connect_as, primary_key, resolve_providers
from tests.unit.docker import stack

pytestmark = pytest.mark.integration

POSTGRES_INIT = stack.DOCKER / "postgres" / "init.sql"
MARIADB_INIT = stack.DOCKER / "mariadb" / "init.sql"
#: Debezium's signal table, column by column: (name, type, length, nullable).
SIGNAL_COLUMNS = [("id", "varchar", 42, False), ("type", "varchar", 32, False), ("data", "varchar", 2048, True)]


def test_postgres_init_builds_the_shop_for_the_capturing_role(stack_postgres: PostgresServer) -> None:
    shop = load_config_file(stack.mounted_file("engine", "/etc/airflow-cdc/engine.yaml"))
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
        pytest.fail("no mariadbd program (install mariadb-server)", pytrace=False)
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


#: The images that build JVM parts; the engine's image is Python only (its Kafka clients are).
MAVEN_IMAGES = ("airflow", "connect")


def test_the_images_with_a_maven_stage_are_those_that_need_jars() -> None:
    with_maven = {p.parent.name for p in stack.DOCKER.glob("*/Dockerfile") if list(maven_stages(p))}
    assert with_maven == set(MAVEN_IMAGES)


@pytest.mark.parametrize("dockerfile", [stack.DOCKER / name / "Dockerfile" for name in MAVEN_IMAGES], ids=MAVEN_IMAGES)
def test_a_maven_stage_produces_the_jars_the_image_copies(dockerfile: Path, tmp_path: Path) -> None:
    """The stage's own command, offline against the Maven repository scripts/setup filled, from
    the repository root (the stage's copy of jvm/), into a scratch directory for its /jars."""
    if shutil.which("mvn") is None:
        pytest.fail("no mvn (bash scripts/setup installs Maven)", pytrace=False)
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
