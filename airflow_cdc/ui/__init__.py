"""The CDC page in Airflow's UI: ``plugin`` (the Airflow plugin), ``app`` (its FastAPI app),
``instances`` (the engine instances Airflow's connections name). This module stays light: the
operators' extra links import it on workers."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

#: Where the plugin mounts its app on the API server.
URL_PREFIX = "/cdc"
PAGE = f"{URL_PREFIX}/"
#: The page's routes in Airflow's UI: under Browse, and as a DAG's tab.
NAV_ROUTE = "cdc"
DAG_ROUTE = "cdc-dag"


def page_url(base_url: str = "", *, instance: str | None = None, snapshot: str | None = None) -> str:
    """The page inside Airflow's frame, opened at an instance (a connection id) and a snapshot
    (its signal id). Airflow's UI puts the framed page's own path after ``/plugin/<route>``;
    ``base_url`` is the API server's ([api] base_url), empty for a path on the same host."""
    query = urlencode({k: v for k, v in (("instance", instance), ("snapshot", snapshot)) if v})
    base = base_url.rstrip("/")
    framed = f"{urlsplit(base).path}{PAGE}"
    return f"{base}/plugin/{NAV_ROUTE}{framed}" + (f"?{query}" if query else "")
