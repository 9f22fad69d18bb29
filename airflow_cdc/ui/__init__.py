"""The CDC page in Airflow's UI: ``plugin`` (the Airflow plugin), ``app`` (its FastAPI app),
``instances`` (the engine instances Airflow's connections name). This module stays light: the
operators' extra links import it on workers."""

from __future__ import annotations

from urllib.parse import urlencode

#: Where the plugin mounts its app on the API server.
URL_PREFIX = "/cdc"
PAGE = f"{URL_PREFIX}/"


def page_url(base_url: str = "", *, instance: str | None = None, snapshot: str | None = None) -> str:
    """The page, opened at an instance (a connection id) and a snapshot (its signal id)."""
    query = urlencode({k: v for k, v in (("instance", instance), ("snapshot", snapshot)) if v})
    return f"{base_url.rstrip('/')}{PAGE}" + (f"?{query}" if query else "")
