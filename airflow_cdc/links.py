"""Extra links of the airflow-cdc operators and sensors: the CDC page in Airflow's UI (the
plugin's, ``airflow_cdc.ui``), opened at the task's instance - and at its snapshot for the
snapshot operator and sensor. The links are relative to the API server ([api] base_url when
set), so they open inside the Airflow a person is looking at, behind its login."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.ui import page_url


def instance_status_url(hook: CdcEngineHook) -> str:
    """The instance's API ``/status`` URL: the connection's address, else the address the
    instance beside the worker wrote last (empty when neither is known). For logs: the API
    asks for the instance's token, which a browser does not have."""
    with hook.get_backend() as backend:
        return backend.status_url()


def _base_url() -> str:
    from airflow.configuration import conf

    return conf.get("api", "base_url", fallback="") or ""


class CdcInstanceLink(BaseOperatorLink):
    """The CDC page at the engine instance the task works on."""

    name = "CDC instance"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        # Airflow 3 calls this on the worker when the task ends and keeps the answer in XCom.
        conn_id = getattr(operator, "cdc_conn_id", None)
        return page_url(_base_url(), instance=conn_id) if conn_id else ""


class CdcSnapshotLink(BaseOperatorLink):
    """The CDC page at the snapshot the task started or waited for."""

    name = "CDC snapshot"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        conn_id = getattr(operator, "cdc_conn_id", None)
        snapshot = getattr(operator, "signal_id", None)  # the sensor's (rendered) argument, the operator's sent id
        if not conn_id:
            return ""
        return page_url(_base_url(), instance=conn_id, snapshot=str(snapshot) if snapshot else None)
