"""The operators without an instance: cheap validation in ``__init__``, templates that render,
the signal data they send, and the failures they turn the engine's errors into."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.errors import ApiError, ApiRefusedError, ApiUnavailableError, ConfigError, ConfigProblem
from airflow_cdc.links import CdcInstanceLink, CdcSnapshotLink
from airflow_cdc.operators.base import CdcOperatorError, CdcUnavailableError, explain
from airflow_cdc.operators.capture import CdcCaptureOperator
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from airflow_cdc.operators.snapshot import CdcSnapshotControlOperator, CdcSnapshotOperator
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor

INTERVAL = {
    "data_interval_start": datetime(2026, 1, 5, tzinfo=UTC),
    "data_interval_end": datetime(2026, 1, 6, tzinfo=UTC),
    "ds": "2026-01-05",
    "params": {"lsn": "0/16B3748", "mode": "no_data"},
}


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: CdcStartEngineOperator(task_id="t", config={"database.password": "x"}), "is a secret"),
        (lambda: CdcStartEngineOperator(task_id="t", config={"name": "other"}), "names the instance"),
        (lambda: CdcStartEngineOperator(task_id="t", config=["a"]), "must be a dict"),
        (lambda: CdcStartEngineOperator(task_id="t", timeout=0), "timeout must be positive"),
        (lambda: CdcStopEngineOperator(task_id="t", timeout=-1), "timeout must be positive"),
        (lambda: CdcSnapshotOperator(task_id="t", tables=[]), "name at least one table"),
        (lambda: CdcSnapshotOperator(task_id="t", tables="t", snapshot_type="full"), "snapshot_type must be"),
        (lambda: CdcSnapshotOperator(task_id="t", tables="t", channel="smoke"), "channel must be one of"),
        (lambda: CdcSnapshotOperator(task_id="t", tables="t", channel="source"), "give it"),
        (lambda: CdcSnapshotControlOperator(task_id="t", action="restart"), "action must be one of"),
        (lambda: CdcSnapshotControlOperator(task_id="t", action="pause", tables="a"), "for action='stop' only"),
        (lambda: CdcOffsetsOperator(task_id="t", action="rewind"), "action must be one of"),
        (lambda: CdcOffsetsOperator(task_id="t", action="seek"), "needs a position"),
        (lambda: CdcOffsetsOperator(task_id="t", action="reset", position="0/1"), "takes no position"),
        (lambda: CdcCaptureOperator(task_id="t"), "never ends"),
        (lambda: CdcCaptureOperator(task_id="t", max_records=0), "at least 1"),
        (lambda: CdcCaptureOperator(task_id="t", config={"api.token": "x"}, max_records=1), "is a secret"),
    ],
)
def test_invalid_arguments_fail_when_the_dag_is_parsed(build: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        build()


def test_templates_render_with_the_data_interval() -> None:
    snapshot = CdcSnapshotOperator(
        task_id="backfill",
        tables="public.orders, public.customers",
        additional_conditions={"public.orders": "updated_at >= '{{ data_interval_start | ds }}'"},
        surrogate_key="{{ 'updated_at' }}",
    )
    snapshot.render_template_fields(INTERVAL)
    assert snapshot.signal_data() == {
        "data-collections": ["public.orders", "public.customers"],
        "type": "incremental",
        "additional-conditions": [{"data-collection": "public.orders", "filter": "updated_at >= '2026-01-05'"}],
        "surrogate-key": "updated_at",
    }
    start = CdcStartEngineOperator(task_id="start", config={"snapshot.mode": "{{ params.mode }}"})
    start.render_template_fields(INTERVAL)
    assert start.config == {"snapshot.mode": "no_data"}
    capture = CdcCaptureOperator(task_id="c", target_position="{{ params.lsn }}", max_duration=timedelta(minutes=5))
    capture.render_template_fields(INTERVAL)
    assert (capture.target_position, capture.max_duration) == ("0/16B3748", 300.0)
    seek = CdcOffsetsOperator(task_id="seek", action="seek", position="{{ params.lsn }}")
    seek.render_template_fields(INTERVAL)
    assert seek.position == "0/16B3748"


def test_one_filter_for_every_table_or_debeziums_own_list() -> None:
    every = CdcSnapshotOperator(task_id="s", tables=["public.a", "public.b"], additional_conditions="x > 1")
    assert every.signal_data()["additional-conditions"] == [
        {"data-collection": "public.a", "filter": "x > 1"},
        {"data-collection": "public.b", "filter": "x > 1"},
    ]
    own = [{"data-collection": "public.a", "filter": "y = 2"}]
    blocking = CdcSnapshotOperator(
        task_id="s", tables=["public.a"], additional_conditions=own, snapshot_type="blocking"
    )
    assert blocking.signal_data() == {
        "data-collections": ["public.a"],
        "type": "blocking",
        "additional-conditions": own,
    }


def test_every_operator_links_to_the_instance() -> None:
    for operator in (
        CdcStartEngineOperator(task_id="a"),
        CdcStopEngineOperator(task_id="b"),
        CdcSnapshotOperator(task_id="c", tables="t"),
        CdcSnapshotControlOperator(task_id="d", action="stop"),
        CdcOffsetsOperator(task_id="e", action="reset"),
        CdcCaptureOperator(task_id="f", max_records=1),
    ):
        assert any(isinstance(link, CdcInstanceLink) for link in operator.operator_extra_links)
        assert "cdc_conn_id" in operator.template_fields
        assert operator.get_openlineage_facets_on_complete(None) is None  # nothing moved yet
        # The CDC page of the Airflow UI at the task's instance, whether or not it is defined yet.
        assert CdcInstanceLink().get_link(operator, ti_key=None) == "/plugin/cdc/cdc/?instance=cdc_engine_default"
    assert CdcInstanceLink().get_link(CdcStopEngineOperator(task_id="x", cdc_conn_id="a b"), ti_key=None) == (
        "/plugin/cdc/cdc/?instance=a+b"
    )


def test_the_snapshot_operator_and_sensor_link_to_their_snapshot() -> None:
    operator = CdcSnapshotOperator(task_id="c", cdc_conn_id="cdc_shop", tables="t")
    assert CdcSnapshotLink().get_link(operator, ti_key=None) == "/plugin/cdc/cdc/?instance=cdc_shop"  # before it ran
    operator.signal_id = "sig-1"  # what execute() sets once the signal is out
    assert CdcSnapshotLink().get_link(operator, ti_key=None) == "/plugin/cdc/cdc/?instance=cdc_shop&snapshot=sig-1"
    sensor = CdcSnapshotSensor(task_id="s", cdc_conn_id="cdc_shop", signal_id="sig-2")
    assert {type(link) for link in sensor.operator_extra_links} == {CdcInstanceLink, CdcSnapshotLink}
    assert CdcSnapshotLink().get_link(sensor, ti_key=None) == "/plugin/cdc/cdc/?instance=cdc_shop&snapshot=sig-2"


@pytest.mark.parametrize(
    ("error", "kind", "says"),
    [
        (
            ApiUnavailableError("GET", "http://h:1/status", 0, "ConnectError"),
            CdcUnavailableError,
            "CdcStartEngineOperator",
        ),
        (ApiError("GET", "http://h:1/status", 401, "missing or wrong bearer token"), CdcOperatorError, "api.token"),
        (ApiRefusedError("PATCH", "http://h:1/x", 409, "stop it first"), CdcOperatorError, "stop it first"),
        (ApiError("GET", "http://h:1/x", 404, "no route /x"), CdcOperatorError, "airflow-cdc engine instance"),
        (ApiError("POST", "http://h:1/signals", 400, "unknown signal type"), CdcOperatorError, "unknown signal type"),
        (ConfigError([ConfigProblem("k", "is bad", "mend it")]), CdcOperatorError, "k: is bad (fix: mend it)"),
    ],
)
def test_engine_errors_become_failures_that_name_the_fix(error: Exception, kind: type, says: str) -> None:
    failure = explain("snapshot of public.orders", error, "cdc_default")  # type: ignore[arg-type]
    assert type(failure) is kind and says in str(failure) and str(failure).startswith("snapshot of public.orders")
    assert isinstance(failure, AirflowFailException) == (kind is CdcOperatorError)  # only the first may retry
