"""A detached start that fails: the error leads with its cause, then this run's log only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance_files import LOG
from tests.integration.instance_cleanup import no_instance_left_running  # noqa: F401 (autouse)
from tests.integration.test_engine_instance import cli, pg_instance_config

pytestmark = pytest.mark.integration


@pytest.fixture
def password_role(pg_server: Any) -> Iterator[str]:
    """A role the server authenticates by password (scram): a wrong one is refused."""
    if pg_server.external:
        pytest.skip("the test server's pg_hba.conf is changed; an external server's is not ours")
    role = f"cdc_start_{uuid.uuid4().hex[:8]}"
    hba = pg_server.data_dir / "pg_hba.conf"
    with pg_server.connect() as conn:
        conn.execute(f"create role {role} login replication password 'the-password'")
        original = hba.read_text()
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
        conn.execute("select pg_reload_conf()")
    try:
        yield role
    finally:
        hba.write_text(hba.read_text().replace(f"host all {role} 127.0.0.1/32 scram-sha-256\n", ""))
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")
            conn.execute(f"drop role if exists {role}")


def instance_config(tmp_path: Path, pg_server: Any, database: str, **database_settings: str) -> Path:
    config = pg_instance_config(tmp_path, pg_server, database)
    settings = yaml.safe_load(config.read_text())
    settings["database"].update(database_settings)
    settings["errors.max.retries"] = 0  # give up at the first refusal
    config.write_text(yaml.safe_dump(settings))
    return config


def test_a_failed_start_says_its_cause_first_and_shows_only_its_own_log(
    tmp_path: Path, pg_server: Any, pg_database: str, password_role: str
) -> None:
    # An earlier run that failed for another reason: its lines stay in engine.log.
    earlier = instance_config(tmp_path, pg_server, pg_database, dbname="no_such_database")
    with pytest.raises(CdcError, match="no_such_database"):
        control.start_detached(earlier, load_config_file(earlier), timeout=60)
    assert "no_such_database" in (tmp_path / "state" / LOG).read_text()

    config = instance_config(tmp_path, pg_server, pg_database, user=password_role, password="not-the-password")
    with pytest.raises(CdcError) as failed:
        control.start_detached(config, load_config_file(config), timeout=60)
    cause, *details = str(failed.value).splitlines()
    assert f'password authentication failed for user "{password_role}"' in cause, str(failed.value)
    assert "the instance exited with code 1" in details[0]
    assert any("task pg-instance-0 failed to start" in line for line in details)
    assert "no_such_database" not in str(failed.value)  # the earlier run's lines are not this one's
    assert "not-the-password" not in str(failed.value)

    # The command line shows the same, cause first.
    started = cli("engine", "start", "--config", str(config), "--timeout", "60")
    assert started.returncode == 1, started.stdout + started.stderr
    first, *rest = started.stderr.splitlines()
    assert first.startswith("error: ") and f'password authentication failed for user "{password_role}"' in first
    assert "no_such_database" not in started.stderr and "not-the-password" not in started.stderr
    # ...and not the lines of the run just before it, whose error was the same.
    assert sum("task pg-instance-0 failed to start" in line for line in rest) == 1, started.stderr
