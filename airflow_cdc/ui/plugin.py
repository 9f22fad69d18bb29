"""The Airflow plugin of airflow-cdc, registered through the ``airflow.plugins`` entry point (it
loads by default; the provider-info ``plugins`` key would load only with
``lazy_discover_providers=False``). It mounts the CDC page's FastAPI app on the API server and adds
the page to the UI: under Browse, and as a tab of every DAG (showing the instances its tasks use).
Views with a ``url_route`` render inside Airflow's own frame at ``/plugin/<url_route>``."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_cdc.ui import DAG_ROUTE, NAV_ROUTE, PAGE, URL_PREFIX
from airflow_cdc.ui.app import create_app

#: Relative: Airflow's UI resolves it against its <base href>, so it holds behind a base path.
HREF = PAGE.lstrip("/")


class CdcPlugin(AirflowPlugin):
    name = "airflow_cdc"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "airflow-cdc"}]
    external_views = [
        {"name": "CDC instances", "href": HREF, "url_route": NAV_ROUTE, "destination": "nav", "category": "browse"},
        {"name": "CDC", "href": HREF + "?dag_id={DAG_ID}", "url_route": DAG_ROUTE, "destination": "dag"},
    ]
