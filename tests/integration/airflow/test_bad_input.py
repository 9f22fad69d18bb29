"""Bad input gives a clear task failure that names the fix, and the instance keeps streaming:
an unknown connection or instance, a wrong token, an API that does not answer, an instance
beside the worker that is not running. (Unknown tables and bad filters: test_snapshot_operators.)"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.base import CdcUnavailableError
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Instance, Source
from tests.integration.airflow.support import client_of, task_context

pytestmark = pytest.mark.integration


def remote(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "cdc_engine", **fields}))
    return conn_id


def snapshot(conn_id: str) -> CdcSnapshotOperator:
    return CdcSnapshotOperator(task_id="snapshot", cdc_conn_id=conn_id, tables=["public.orders"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_connections_fail_clearly_and_the_instance_streams_on(
    connections: Instance, source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    xcom = CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, config={"snapshot.mode": "no_data"}
    ).execute(task_context())
    url = str(xcom["api_url"])

    with pytest.raises(AirflowFailException) as undefined:
        snapshot("no_such_connection").execute(task_context())
    assert "no_such_connection" in str(undefined.value) and "AIRFLOW_CONN_" in str(undefined.value)

    other = remote(monkeypatch, "cdc_other", host=url, login="warehouse", password=connections.token)
    with pytest.raises(AirflowFailException) as mismatch:
        snapshot(other).execute(task_context())
    assert f"serves instance {connections.name!r}, not 'warehouse'" in str(mismatch.value)

    wrong = remote(monkeypatch, "cdc_wrong_token", host=url, password="not-the-token")
    with pytest.raises(AirflowFailException) as refused:
        snapshot(wrong).execute(task_context())
    assert "refused the token" in str(refused.value) and "api.token" in str(refused.value)
    assert "not-the-token" not in str(refused.value)

    gone = remote(monkeypatch, "cdc_gone", host=f"http://127.0.0.1:{free_port()}", password="t")
    with pytest.raises(AirflowException) as unreachable:
        snapshot(gone).execute(task_context())
    assert isinstance(unreachable.value, CdcUnavailableError)  # retriable: the instance may come up
    assert not isinstance(unreachable.value, AirflowFailException)
    assert "does not answer" in str(unreachable.value) and "CdcStartEngineOperator" in str(unreachable.value)
    # Stopping what does not answer is idempotent.
    assert CdcStopEngineOperator(task_id="stop", cdc_conn_id=gone).execute(task_context())["stopped"] is False

    with source.connect() as conn:
        conn.execute("insert into orders values (100, 'still streaming', date '2026-02-01')")
    lsn = source.lsn()
    with client_of(xcom, connections.token) as client:
        wait_until(lambda: client.position(target=lsn).reached, 30, "streamed past the bad calls")
        assert client.status().running


def test_an_instance_beside_the_worker_that_is_not_running(connections: Instance) -> None:
    with pytest.raises(CdcUnavailableError) as failed:
        snapshot(CDC_CONN).execute(task_context())
    assert "is not running" in str(failed.value) and "CdcStartEngineOperator" in str(failed.value)
    stopped = CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())
    assert stopped["stopped"] is False


def test_a_start_without_a_config_file_or_a_host_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    conn_id = remote(monkeypatch, "cdc_nowhere", password="t")
    with pytest.raises(AirflowFailException, match=r"neither a host .* nor an extra config_path"):
        CdcStartEngineOperator(task_id="start", cdc_conn_id=conn_id).execute(task_context())


def test_a_start_of_an_engine_service_that_does_not_answer_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    # A host and no config_path is an engine service (airflow-cdc engine serve): one that is down
    # is a retriable failure naming the host to correct, not a demand for a config file.
    conn_id = remote(monkeypatch, "cdc_remote_only", host="http://127.0.0.1:1", password="t")
    with pytest.raises(CdcUnavailableError, match=r"does not answer at http://127\.0\.0\.1:1.*correct the host"):
        CdcStartEngineOperator(task_id="start", cdc_conn_id=conn_id).execute(task_context())


def test_a_misspelt_key_fails_the_start_before_anything_starts(connections: Instance) -> None:
    start = CdcStartEngineOperator(
        task_id="start",
        cdc_conn_id=CDC_CONN,
        source_conn_id=PG_CONN,
        config={"offest.flush.interval.ms": 1000, "snapshot.mode": "no_data"},
    )
    with pytest.raises(AirflowFailException) as failed:
        start.execute(task_context())
    first = str(failed.value).splitlines()[0]
    assert "offest.flush.interval.ms" in first and "did you mean offset.flush.interval.ms?" in first
    assert "allow_unknown_keys=True" in str(failed.value)
    assert not (connections.state_dir / "instance.json").exists()  # nothing was started


def test_unknown_keys_allowed_are_warnings_in_the_task_log(
    connections: Instance, capsys: pytest.CaptureFixture[str]
) -> None:
    start = CdcStartEngineOperator(
        task_id="start",
        cdc_conn_id=CDC_CONN,
        source_conn_id=PG_CONN,
        config={"tabel.include.list": "public.orders", "snapshot.mode": "no_data"},
        allow_unknown_keys=True,
    )
    start.execute(task_context())
    warned = [line for line in capsys.readouterr().out.splitlines() if "tabel.include.list" in line]
    assert warned and "warning" in warned[0] and "did you mean table.include.list?" in warned[0]
    assert CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())["stopped"] is True


def test_a_whole_table_snapshot_after_an_initial_one_is_warned_about(
    connections: Instance, capsys: pytest.CaptureFixture[str]
) -> None:
    # snapshot.mode left at Debezium's default (initial): the start read every row once already.
    CdcStartEngineOperator(task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN).execute(task_context())
    snapshot(CDC_CONN).execute(task_context())
    out = capsys.readouterr().out
    assert "snapshot.mode=initial, which read these tables when it started" in out
    assert "config={'snapshot.mode': 'no_data'}" in out
    filtered = CdcSnapshotOperator(
        task_id="backfill", cdc_conn_id=CDC_CONN, tables=["public.orders"], additional_conditions="id > 0"
    )
    filtered.execute(task_context())
    assert "each arrives twice" not in capsys.readouterr().out  # a filtered snapshot means to read again
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())
