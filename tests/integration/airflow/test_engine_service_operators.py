"""The operators against an engine service (``airflow-cdc engine serve``) reached by URL only, as
a DAG on Celery or Kubernetes workers reaches the engine's own pod: start it with the DAG's
configuration and the source connection's address (never its password: the service keeps its
own, here through ``${env:...}`` as a Kubernetes Secret gives it), idempotently; refuse another
configuration; stop it (its process and API stay); seek and reset its offsets through the API
while it is stopped; and start it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from tests.integration.airflow.conftest import CDC_CONN, PASSWORD, PG_CONN, Instance, Source, connection_env
from tests.integration.airflow.support import task_context

pytestmark = pytest.mark.integration


@pytest.fixture
def served(instance: Instance, source: Source, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineClient]:
    """The instance's config file, whole (as a ConfigMap gives it) but for the password, which it
    reads from the environment (as a Secret gives it), served and booted stopped; connection
    ``cdc_test`` names only its URL and token."""
    config = yaml.safe_load(instance.config_path.read_text())
    config.update(
        {
            "database.hostname": source.server.host,
            "database.port": source.server.port,
            "database.user": source.user,
            "database.dbname": source.database,
            "database.password": "${env:SHOP_DB_PASSWORD}",
            "api.port": 0,
        }
    )
    instance.config_path.write_text(yaml.safe_dump(config))
    log = open(instance.config_path.with_suffix(".log"), "ab")  # noqa: SIM115 - the child writes to it
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airflow_cdc.cli",
            "engine",
            "serve",
            "--stopped",
            "--config",
            str(instance.config_path),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SHOP_DB_PASSWORD": source.password},
    )
    try:
        wait_until(
            lambda: process.poll() is not None or (read_status(instance.state_dir) or {}).get("pid") == process.pid,
            60,
            "the service up",
        )
        assert process.poll() is None, instance.config_path.with_suffix(".log").read_text()
        url = str(read_status(instance.state_dir)["api"])  # type: ignore[index]
        conn = {"conn_type": "cdc_engine", "host": url, "password": instance.token, "extra": {"timeout": 10}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CDC_CONN.upper()}", connection_env(conn))
        source_conn = {
            "conn_type": "postgres",
            "host": source.server.host,
            "port": source.server.port,
            "login": source.user,
            "password": "not-the-password",  # the service's own is the one used
            "schema": source.database,
        }
        monkeypatch.setenv(f"AIRFLOW_CONN_{PG_CONN.upper()}", connection_env(source_conn))
        with EngineClient(url, instance.token) as client:
            yield client
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0


def start(config: dict[str, Any]) -> CdcStartEngineOperator:
    return CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=60, config=config
    )


def stop() -> CdcStopEngineOperator:
    return CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN, timeout=60)


def test_a_served_engine_is_started_stopped_and_its_offsets_changed_by_url(
    served: EngineClient, instance: Instance, source: Source, caplog: pytest.LogCaptureFixture
) -> None:
    first = start({"table.include.list": "public.orders"}).execute(task_context())
    assert (first["name"], first["started"], first["phase"]) == (instance.name, True, "streaming")
    config = served.connector(instance.name)["config"]
    assert config["table.include.list"] == "public.orders" and config["database.user"] == source.user
    assert "database.password" not in config

    again = start({"table.include.list": "public.orders"}).execute(task_context())
    assert (again["started"], again["run_id"]) == (False, first["run_id"])
    with pytest.raises(AirflowFailException, match=r"table\.include\.list: running 'public\.orders'"):
        start({"table.include.list": "public.customers"}).execute(task_context())

    with pytest.raises(AirflowFailException, match="CdcStopEngineOperator first"):
        CdcOffsetsOperator(task_id="reset", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())

    # The snapshot's rows are committed before the stop returns: it drains and commits.
    assert stop().execute(task_context()) == {"name": instance.name, "stopped": True, "state": "STOPPED"}
    assert served.status().state == "STOPPED" and served.health()  # the API stays
    assert stop().execute(task_context())["stopped"] is False
    committed = served.offsets()
    assert len(committed) == 1 and committed[0].partition == {"server": "shop"}

    # force: only the service holds the source's password, so Airflow cannot check the LSN against the
    # server (the service's offsets endpoint could, with its own configuration)
    seek = CdcOffsetsOperator(task_id="seek", cdc_conn_id=CDC_CONN, action="seek", position="0/16B3748", force=True)
    sought = seek.execute(task_context())
    assert sought["position"] == "0/16B3748" and served.offsets()[0].offset["lsn"] == 0x16B3748
    reset = CdcOffsetsOperator(task_id="reset", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())
    assert reset["action"] == "reset" and served.offsets() == []

    # Started again after the reset: a first start, its snapshot taken again.
    with source.connect() as conn:
        conn.execute("insert into orders values (21, 'open', date '2026-02-01')")
    restarted = start({"table.include.list": "public.orders"}).execute(task_context())
    assert restarted["started"] is True and restarted["run_id"] != first["run_id"]
    assert PASSWORD not in json.dumps([first, again, sought, reset, restarted]) + caplog.text
