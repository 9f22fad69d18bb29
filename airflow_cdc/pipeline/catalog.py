"""A pipeline's ``table_pattern`` resolved against the source database's catalog, at parse time,
and kept on disk for ``cache_ttl`` seconds.

Airflow parses a DAG file every few minutes in every DAG processor: asking the source database
each time would put a query on it per parse and make parsing fail whenever it is down. The
resolved list is written next to the other airflow-cdc state (``$AIRFLOW_HOME/cdc/pipelines``)
and reused while fresh; when the database cannot be reached, a stale list is used (with a
warning) rather than a DAG that fails to import and vanishes from the UI.

One query serves PostgreSQL and MySQL alike: ``information_schema.tables`` names PostgreSQL's
schema and MySQL's database ``table_schema``, which is the first part of a data collection on each.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.pipeline.spec import TablePatternSpec

log = logging.getLogger(__name__)

#: Base tables outside the databases' own schemas, as ``schema.table``.
CATALOG_QUERY = (
    "select concat(table_schema, '.', table_name) from information_schema.tables "
    "where table_type = 'BASE TABLE' and table_schema not in "
    "('pg_catalog', 'information_schema', 'mysql', 'performance_schema', 'sys')"
)

TableLister = Callable[[str], list[str]]


class CatalogUnavailableError(RetriableError):
    """The source's catalog could not be read and no earlier list of its tables is kept."""


def default_cache_dir() -> Path:
    home = os.environ.get("AIRFLOW_HOME", str(Path.home() / "airflow"))
    return Path(home) / "cdc" / "pipelines"


def airflow_catalog(conn_id: str) -> list[str]:
    """The source's tables through its Airflow connection's SQL hook (postgres or mysql provider)."""
    from airflow.sdk import BaseHook

    hook = BaseHook.get_connection(conn_id).get_hook()  # type: ignore[no-untyped-call]
    return sorted(str(row[0]) for row in hook.get_records(CATALOG_QUERY))


def matching(tables: list[str], spec: TablePatternSpec) -> list[str]:
    """The tables ``spec.pattern`` matches in full, less those an ``exclude`` pattern matches."""
    pattern = re.compile(spec.pattern)
    excluded = [re.compile(item) for item in spec.exclude]
    return sorted(t for t in tables if pattern.fullmatch(t) and not any(item.fullmatch(t) for item in excluded))


def resolve_tables(
    name: str,
    conn_id: str,
    spec: TablePatternSpec,
    *,
    cache_dir: Path | None = None,
    lister: TableLister = airflow_catalog,
    now: Callable[[], float] = time.time,
) -> list[str]:
    """The tables of pipeline ``name`` that match ``spec`` in ``conn_id``'s database: from the
    cache while it is younger than ``spec.cache_ttl``, else from the catalog (and cached)."""
    path = (cache_dir or default_cache_dir()) / f"{name}.tables.json"
    key = hashlib.sha256(json.dumps([conn_id, spec.pattern, spec.exclude]).encode()).hexdigest()
    cached = _read(path, key)
    if cached is not None and now() - cached[0] < spec.cache_ttl:
        return cached[1]
    try:
        tables = matching(lister(conn_id), spec)
    except Exception as exc:  # any driver's error: the database is what failed
        if cached is not None:
            log.warning(
                "pipeline %s: the catalog of %r could not be read (%s); using the tables found %.0fs ago",
                name,
                conn_id,
                exc,
                now() - cached[0],
            )
            return cached[1]
        raise CatalogUnavailableError(
            f"pipeline {name}: table_pattern {spec.pattern!r} needs the catalog of connection {conn_id!r}, which "
            f"could not be read ({exc}); list the tables under `tables:` to parse without the database"
        ) from exc
    _write(path, {"key": key, "resolved_at": now(), "tables": tables})
    return tables


def _read(path: Path, key: str) -> tuple[float, list[str]] | None:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key:  # another pattern or source: not ours
        return None
    return float(kept["resolved_at"]), [str(t) for t in kept["tables"]]


def _write(path: Path, content: dict[str, object]) -> None:
    """Written whole, then renamed: a parse running at the same time reads the old or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(content))
    partial.replace(path)
