"""Extra links of the airflow-cdc operators: the engine instance's status (its control API's
``/status``; a UI page of its own comes later). The API asks for the instance's token, which
the link never carries."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_cdc.hooks.engine import CdcEngineHook


def instance_status_url(hook: CdcEngineHook) -> str:
    """The instance's ``/status`` URL: the connection's API address, else the address the
    instance beside the worker wrote last (empty when neither is known)."""
    base = hook.settings.url or str((hook.local_status() or {}).get("api") or "")
    return f"{base.rstrip('/')}/status" if base else ""


class CdcInstanceLink(BaseOperatorLink):
    """The status of the engine instance an operator worked on."""

    name = "CDC instance status"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        # Airflow 3 calls this on the worker when the task ends and keeps the answer in XCom.
        known = getattr(operator, "instance_status_url", "")
        if known:
            return str(known)
        conn_id = getattr(operator, "cdc_conn_id", None)
        if not conn_id:
            return ""
        try:
            return instance_status_url(CdcEngineHook(conn_id))
        except Exception:  # a link must never fail a task: no connection, no instance yet
            return ""
