"""The engine instances Airflow knows: every connection of type ``cdc_engine`` (and every
Debezium connector of a ``kafka_connect`` one, ADR 0017), from the
``AIRFLOW_CONN_*`` environment variables and the metadata database (a secrets backend cannot
be listed; a connection kept only there is reached by its id: :func:`engine_settings`). Each
becomes a :class:`~airflow_cdc.monitoring.Monitor`, kept for the life of the process so
events/s and the notification cursor carry over between refreshes.

In a multi-team deployment (``[core] multi_team``) a connection belongs to the team the metadata
database names (:func:`connection_teams`, as Airflow's own connection routes find it): the page
asks the auth manager with that team, and looks the connection (and its source's) up as that
team's tasks would."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable

from airflow_cdc.backends import EngineBackend, open_backend
from airflow_cdc.health import retained_log
from airflow_cdc.hooks.engine import CdcEngineHook, connection_settings
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, EngineConnection
from airflow_cdc.hooks.source_config import SourceConfig, from_connection
from airflow_cdc.monitoring import InstanceView, Monitor

log = logging.getLogger(__name__)

CONN_TYPES = (CdcEngineHook.conn_type, KAFKA_CONNECT)
ENV_PREFIX = "AIRFLOW_CONN_"


def connection_ids() -> list[str]:
    """Ids of the ``cdc_engine`` connections in the environment and the metadata database,
    sorted (the environment wins a clash, as it does in Airflow's own lookup)."""
    from airflow.models import Connection

    found: set[str] = set()
    for key in os.environ:
        if key.startswith(ENV_PREFIX):
            conn_id = key[len(ENV_PREFIX) :].lower()
            try:
                if Connection.get_connection_from_secrets(conn_id).conn_type in CONN_TYPES:
                    found.add(conn_id)
            except Exception as exc:  # one malformed variable must not hide the others
                log.warning("connection %s from %s%s is unusable: %s", conn_id, ENV_PREFIX, conn_id.upper(), exc)
    found.update(_database_ids())
    return sorted(found)


def _database_ids() -> list[str]:
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    try:
        with create_session() as session:
            return list(session.scalars(select(Connection.conn_id).where(Connection.conn_type.in_(CONN_TYPES))))
    except Exception as exc:  # no metadata database here (a bare CLI): the environment still counts
        log.debug("no connections read from the metadata database: %s", exc)
        return []


def connection_teams(conn_ids: Iterable[str]) -> dict[str, str | None]:
    """Each connection's team, found as Airflow's own connection routes find it: with
    ``[core] multi_team`` its ``team_name`` in the metadata database (one that only the
    environment or a secrets backend holds belongs to no team), without it none."""
    from airflow.configuration import conf
    from airflow.models import Connection

    ids = list(conn_ids)
    teams: dict[str, str | None] = dict.fromkeys(ids)
    if ids and conf.getboolean("core", "multi_team"):
        teams.update(Connection.get_conn_id_to_team_name_mapping(ids))
    return teams


def engine_settings(conn_id: str, team_name: str | None = None) -> EngineConnection:
    """The connection's settings, looked up as Airflow does (environment, secrets backends,
    database; a team's connection as that team's); a ConfigError names what to fix."""
    from airflow.models import Connection

    return connection_settings(conn_id, Connection.get_connection_from_secrets(conn_id, team_name=team_name))


def source_config(conn_id: str) -> SourceConfig | None:
    """The source connection the instance's connection names (extra ``source_conn_id``), looked
    up as the instance's team; None when it names none."""
    from airflow.models import Connection

    team_name = connection_teams([conn_id])[conn_id]
    settings = engine_settings(conn_id, team_name)
    if not settings.source_conn_id:
        return None
    return from_connection(Connection.get_connection_from_secrets(settings.source_conn_id, team_name=team_name))


def client_for(conn_id: str) -> EngineBackend:
    """The connection's backend (a connector's reads its source connection too, as Airflow
    looks connections up). In multi-team mode Airflow finds a team's connection only when
    asked as that team: the source is looked up as the instance's team too."""
    from airflow.models import Connection

    team_name = connection_teams([conn_id])[conn_id]
    settings = engine_settings(conn_id, team_name)

    def source() -> SourceConfig | None:
        if not settings.source_conn_id:
            return None
        return from_connection(Connection.get_connection_from_secrets(settings.source_conn_id, team_name=team_name))

    return open_backend(settings, conn_id, source)


def retained_wal(conn_id: str) -> int | None:
    """The WAL the instance's slot retains (None: its source keeps none per consumer), asked of
    the source database with the password of the connection's ``source_conn_id`` if it names one
    (else none: trust or .pgpass on the API server's host)."""
    source = source_config(conn_id)
    password = source.password if source is not None else None
    with client_for(conn_id) as backend:
        return retained_log(backend.running_config(), password)


class Instances:
    """A monitor per connection id, made on first use."""

    def __init__(self, ids: Callable[[], list[str]] = connection_ids) -> None:
        self._ids = ids
        self._lock = threading.Lock()
        self._monitors: dict[str, Monitor] = {}

    def monitor(self, conn_id: str) -> Monitor:
        with self._lock:
            if conn_id not in self._monitors:
                self._monitors[conn_id] = Monitor(conn_id, lambda: client_for(conn_id))
            return self._monitors[conn_id]

    def observe(self, allowed: Callable[[str], bool] = lambda _: True) -> list[InstanceView]:
        """Every known instance the caller may see, observed now."""
        return [self.monitor(conn_id).observe() for conn_id in self._ids() if allowed(conn_id)]
