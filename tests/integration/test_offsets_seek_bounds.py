"""``airflow-cdc offsets set`` (and ``offsets_admin.position_offset``, which the backends' seek
uses) refuses a position the source server has not reached - the next start would skip every
change written until it gets there - naming both positions; refuses when the server cannot be
reached to tell, unless forced; and an LSN half wider than 32 bits is no LSN."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_cdc.cli import EXIT_FAILED, EXIT_REFUSED, main
from airflow_cdc.engine.errors import SeekRefusedError
from airflow_cdc.engine.server import offsets_admin
from airflow_cdc.engine.sources.postgres.pgoutput import format_lsn, parse_lsn

pytestmark = pytest.mark.integration

PARTITION = json.dumps({"server": "shop"})


def free_port() -> int:
    """A port nothing listens on (taken from the kernel and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(tmp_path: Path, props: dict[str, Any]) -> Path:
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump({"topic.prefix": "shop", "state.dir": str(tmp_path / "state"), **props}))
    return path


def seek(config: Path, position: str, *more: str) -> int:
    return main(["offsets", "set", "--config", str(config), "--position", position, "--partition", PARTITION, *more])


@pytest.fixture
def pg_config(tmp_path: Path, pg_server: Any, pg_database: str) -> dict[str, Any]:
    return {
        "name": "pg-seek",
        "connector.class": "postgres",
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.dbname": pg_database,
    }


def pg_lsn(pg_server: Any) -> int:
    with pg_server.connect() as conn:
        return parse_lsn(conn.execute("select pg_current_wal_lsn()::text").fetchone()[0])


def test_postgres_a_position_past_the_servers_is_refused_naming_both(
    tmp_path: Path, pg_server: Any, pg_config: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, pg_config)
    now = pg_lsn(pg_server)
    ahead = format_lsn(((now >> 32) + 1) << 32)  # 4 GiB of WAL the server has not written
    assert seek(config, ahead) == EXIT_REFUSED
    err = capsys.readouterr().err
    current = re.search(
        rf"refused: position {re.escape(ahead)} is ahead of the source server's current position "
        r"([0-9A-F]+/[0-9A-F]+): ",
        err,
    )
    assert current is not None, err
    assert now <= parse_lsn(current[1]) < parse_lsn(ahead)
    assert "--force" in err
    assert main(["offsets", "show", "--config", str(config)]) == 0
    assert json.loads(capsys.readouterr().out) == {"offsets": []}  # nothing was written

    assert seek(config, format_lsn(now)) == 0  # where the server stands, or before it: done
    assert json.loads(capsys.readouterr().out)["position"] == format_lsn(now)
    assert seek(config, ahead, "--force") == 0
    assert json.loads(capsys.readouterr().out)["position"] == ahead

    with pytest.raises(SeekRefusedError, match="is ahead of the source server's current position"):
        offsets_admin.position_offset(yaml.safe_load(config.read_text()), ahead)
    assert offsets_admin.position_offset(yaml.safe_load(config.read_text()), ahead, force=True)["lsn"] == parse_lsn(
        ahead
    )


def test_postgres_an_lsn_half_wider_than_32_bits_is_refused_naming_the_form(
    tmp_path: Path, pg_config: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, pg_config)
    assert seek(config, "0/100000000", "--force") == EXIT_FAILED  # it was taken as 1/0
    err = capsys.readouterr().err
    assert "'0/100000000' is not an LSN like 0/16B3748" in err and "each at most FFFFFFFF" in err
    assert "its low half is longer" in err


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_a_server_that_cannot_be_reached_refuses_the_seek_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    config = write_config(
        tmp_path,
        {
            "name": "gone",
            "connector.class": kind,
            "database.hostname": "127.0.0.1",
            "database.port": free_port(),
            **({"database.dbname": "shop"} if kind == "postgres" else {}),
        },
    )
    position = "0/16B3748" if kind == "postgres" else "0-1-42"
    assert seek(config, position) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert f"refused: cannot check position {position} against the source server's current position" in err
    assert "make the server reachable" in err and "--force" in err
    assert seek(config, position, "--force") == 0
    assert json.loads(capsys.readouterr().out)["position"] == position


@pytest.fixture
def maria_config(mariadb_server: Any, mariadb_database: str) -> dict[str, Any]:
    return {
        "name": "maria-seek",
        "connector.class": "mariadb",
        "database.hostname": mariadb_server.host,
        "database.port": mariadb_server.port,
        "database.user": mariadb_server.user,
        "database.password": mariadb_server.password,
        "database.include.list": mariadb_database,
    }


def test_mariadb_a_gtid_position_the_server_has_not_reached_is_refused(
    tmp_path: Path, mariadb_server: Any, mariadb_database: str, maria_config: dict[str, Any], capsys: Any
) -> None:
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("create table t (id int primary key)")
        cur.execute("insert into t values (1)")
        cur.execute("select @@gtid_binlog_pos")
        (now,) = cur.fetchone()
    domain, server_id, sequence = (int(part) for part in now.split(",")[0].split("-"))
    config = write_config(tmp_path, maria_config)

    ahead = f"{domain}-{server_id}-{sequence + 1000}"
    assert seek(config, ahead) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert f"refused: position {ahead} is ahead of the source server's current position {domain}-" in err, err

    unknown_domain = f"{domain + 7}-{server_id}-1"  # a domain the server never wrote
    assert seek(config, unknown_domain) == EXIT_REFUSED
    assert f"position {unknown_domain} cannot be placed at or before the source server's" in capsys.readouterr().err

    binlog = "cdc-bin.000001:4"  # another form than the GTIDs the server reports: cannot tell
    assert seek(config, binlog) == EXIT_REFUSED
    assert "written in another form than the server's" in capsys.readouterr().err
    assert seek(config, binlog, "--force") == 0
    capsys.readouterr()

    behind = f"{domain}-{server_id}-{max(1, sequence - 1)}"
    assert seek(config, behind) == 0
    assert json.loads(capsys.readouterr().out)["position"] == behind
