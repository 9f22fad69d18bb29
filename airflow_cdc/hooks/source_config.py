"""Airflow's own source connections (``postgres``, ``mysql``) as engine configuration with
Debezium's keys, through one declarative map per connection type (ADR 0011).

A DAG author names a connection; the engine gets ``database.hostname``, ``database.port``,
``database.user``, the database and ``connector.class`` from it. The password is resolved when
the task runs and leaves this module only through :meth:`SourceConfig.environment` (the
variable the source's driver reads, for an instance started detached) or
:meth:`SourceConfig.with_secret` (an engine run inside the task): it is never part of
:attr:`SourceConfig.properties`, of a ``repr``, of a log line or of an XCom.

Precedence when a configuration is assembled (:func:`engine_config`): the instance's config file,
then the source connection, then the operator's ``config``. Nothing here imports Airflow: a
connection is read through its attributes, so the maps are tested without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Which keys are secrets (never in a DAG argument, a log line, an error or an XCom) is the
# engine's one rule; backends import it from here too.
from airflow_cdc.engine.config import is_secret_key as is_secret_key
from airflow_cdc.engine.connector import KINDS, source_kind
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.server.instance_files import override_problems


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every secret value replaced by ``***`` (for messages and logs)."""
    return {key: "***" if is_secret_key(key) and value not in (None, "") else value for key, value in config.items()}


@dataclass(frozen=True)
class SourceMapping:
    """How one Airflow connection type becomes engine configuration."""

    conn_type: str
    #: The kinds of source (``airflow_cdc.engine.connector.KINDS``) this connection can feed; the
    #: first is the default.
    kinds: tuple[str, ...]
    #: Connection attribute -> Debezium key.
    fields: Mapping[str, str]
    #: Connection extra -> (Debezium key, how the extra's value is written there).
    extras: Mapping[str, tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)
    #: Connection attributes that must be set.
    required: tuple[str, ...] = ("host",)
    #: Where the password goes in an engine's configuration.
    secret_key: str = "database.password"
    #: The environment variable the source's driver reads a password from when the
    #: configuration carries none (libpq: PGPASSWORD): how a detached instance gets it.
    password_env: str = ""
    #: OpenLineage's dataset namespace scheme (``postgres://host:port``).
    lineage_scheme: str = ""
    #: The Debezium key naming the database, for lineage names.
    database_key: str = "database.dbname"
    #: The server's port when the configuration names none.
    default_port: int = 0

    @property
    def connector_classes(self) -> tuple[str, ...]:
        """Debezium's ``connector.class`` of each kind; the first is the default."""
        return tuple(kind.debezium_class for name in self.kinds for kind in KINDS if kind.name == name)


POSTGRES = SourceMapping(
    conn_type="postgres",
    kinds=("postgres",),
    fields={
        "host": "database.hostname",
        "port": "database.port",
        "login": "database.user",
        "schema": "database.dbname",
    },
    # The postgres provider's extras, which are libpq's TLS parameters, to Debezium's keys.
    extras={name: (f"database.{name}", str) for name in ("sslmode", "sslrootcert", "sslcert", "sslkey")},
    password_env="PGPASSWORD",
    lineage_scheme="postgres",
    default_port=5432,
)

MYSQL = SourceMapping(
    conn_type="mysql",
    kinds=("mysql", "mariadb"),
    # Airflow's MySQL connection names one database in ``schema``; Debezium's MySQL connector
    # reads the whole server and filters databases with database.include.list.
    fields={
        "host": "database.hostname",
        "port": "database.port",
        "login": "database.user",
        "schema": "database.include.list",
    },
    extras={"ssl_mode": ("database.ssl.mode", lambda value: str(value).lower())},
    password_env="MYSQL_PWD",
    lineage_scheme="mysql",
    database_key="database.include.list",
    default_port=3306,
)

#: The maps, by Airflow connection type (``postgresql`` is how some URIs spell ``postgres``).
MAPPINGS: dict[str, SourceMapping] = {"postgres": POSTGRES, "postgresql": POSTGRES, "mysql": MYSQL}


def mapping_for(conn_type: str | None, conn_id: str) -> SourceMapping:
    mapping = MAPPINGS.get(str(conn_type or "").lower())
    if mapping is None:
        raise ConfigError(
            [
                ConfigProblem(
                    conn_id,
                    f"is a {conn_type!r} connection; a source connection is one of: {', '.join(sorted(MAPPINGS))}",
                    "give the id of a postgres or mysql connection",
                )
            ]
        )
    return mapping


def mapping_of_connector(connector_class: str | None) -> SourceMapping | None:
    """The map whose connector ``connector.class`` names, by any of the registry's names for
    it (None for ``synthetic`` or a plugin)."""
    kind = source_kind(connector_class)
    for mapping in (POSTGRES, MYSQL):
        if kind is not None and kind.name in mapping.kinds:
            return mapping
    return None


@dataclass(frozen=True)
class SourceConfig:
    """What a source connection gives an engine."""

    conn_id: str
    mapping: SourceMapping
    #: Debezium keys and values, without the password.
    properties: dict[str, Any]
    password: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # the password never reaches a log line
        password = "***" if self.password else None
        return f"SourceConfig(conn_id={self.conn_id!r}, properties={self.properties!r}, password={password!r})"

    def environment(self) -> dict[str, str]:
        """For an instance started detached: the password where its driver looks for it."""
        return {self.mapping.password_env: self.password} if self.password and self.mapping.password_env else {}

    def with_secret(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` with the password, for an engine run inside this process."""
        return {**config, self.mapping.secret_key: self.password} if self.password else dict(config)


def connection_extras(extra: str | Mapping[str, Any] | None, conn_id: str) -> dict[str, Any]:
    """A connection's extra as a dict (Airflow keeps it as JSON text); ConfigError naming the
    connection when it is not a JSON object."""
    if not extra:
        return {}
    if isinstance(extra, Mapping):
        return dict(extra)
    try:
        parsed = json.loads(extra)
    except ValueError:
        raise ConfigError(
            [ConfigProblem(f"{conn_id}.extra", "is not JSON", "write the extras as a JSON object")]
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(
            [
                ConfigProblem(
                    f"{conn_id}.extra",
                    f"is not a JSON object: {extra.strip()[:60]!r}",
                    'write the extras as a JSON object, {"name": value, ...}',
                )
            ]
        )
    return parsed


def source_config(
    conn_id: str,
    *,
    conn_type: str | None,
    host: str | None = None,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    extra: str | Mapping[str, Any] | None = None,
) -> SourceConfig:
    """The engine configuration a connection's fields give; ConfigError names what is missing."""
    mapping = mapping_for(conn_type, conn_id)
    values = {"host": host, "port": port, "login": login, "schema": schema}
    missing = [name for name in mapping.required if not values.get(name)]
    if missing:
        raise ConfigError(
            [ConfigProblem(f"{conn_id}.{name}", "is not set", f"set the connection's {name}") for name in missing]
        )
    properties: dict[str, Any] = {"connector.class": mapping.connector_classes[0]}
    for attribute, key in mapping.fields.items():
        value = values[attribute]
        if value not in (None, ""):
            properties[key] = int(value) if attribute == "port" else value
    extras = connection_extras(extra, conn_id)
    for name, (key, convert) in mapping.extras.items():
        if extras.get(name) not in (None, ""):
            properties[key] = convert(extras[name])
    return SourceConfig(conn_id, mapping, properties, password or None)


def from_connection(conn: Any) -> SourceConfig:
    """:func:`source_config` of an Airflow ``Connection`` (read through its attributes)."""
    return source_config(
        conn.conn_id,
        conn_type=conn.conn_type,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        schema=conn.schema,
        extra=conn.extra,
    )


def engine_config(
    base: Mapping[str, Any], *, source: SourceConfig | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The instance's config file (``base``), the source connection over it, the operator's
    ``config`` over both. No password from ``source`` is added (see :class:`SourceConfig`); one
    in ``base`` is dropped when a source connection is given, so that the connection's wins."""
    overrides = dict(overrides or {})
    problems = override_problems(overrides)
    if problems:
        raise ConfigError(problems)
    merged = dict(base)
    if source is not None:
        merged.pop(source.mapping.secret_key, None)
        connector = overrides.get("connector.class") or merged.get("connector.class")
        owner = mapping_of_connector(connector)
        if owner is not None and owner is not source.mapping:
            raise ConfigError(
                [
                    ConfigProblem(
                        source.conn_id,
                        f"is a {source.mapping.conn_type} connection; the instance's connector.class is {connector}",
                        "give a source connection of the instance's database, or change connector.class",
                    )
                ]
            )
        properties = dict(source.properties)
        if connector:
            properties.pop("connector.class")
        merged.update(properties)
    merged.update(overrides)
    return merged


def lineage_namespace(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """OpenLineage's ``(namespace, database)`` for the source of ``config`` (e.g.
    ``("postgres://db:5432", "shop")``), None for a source without a map."""
    mapping = mapping_of_connector(str(config.get("connector.class") or ""))
    if mapping is None:
        return None
    host = config.get("database.hostname") or "localhost"
    port = config.get("database.port") or mapping.default_port
    return f"{mapping.lineage_scheme}://{host}:{port}", str(config.get(mapping.database_key) or "")
