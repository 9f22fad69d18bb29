"""Debezium signals sent to an engine instance through a channel it listens on (ADR 0011):

* ``api`` - the instance's control API (``POST /signals``), through the engine's client;
* ``source`` - a row in the signal table (``signal.data.collection``), written over the source
  database's Airflow connection (``postgres`` with psycopg, ``mysql`` with PyMySQL) - the
  channel that also reaches Debezium on Kafka Connect;
* ``kafka`` - a record on ``signal.kafka.topic`` keyed by ``topic.prefix`` (kafka-python).

Which table, topic and servers: the configuration the instance runs with (Kafka Connect's
``GET /connectors/<name>``, which a Connect cluster answers the same way). Every signal is
checked with the engine's own signal model first, so a malformed one fails at once on every
channel; what the instance then makes of it (an unknown table, a bad filter) comes back as a
notification carrying the signal's id, which :meth:`CdcSignalHook.send` returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import orjson
from airflow.sdk import BaseHook

from airflow_cdc.engine.connector import source_database
from airflow_cdc.engine.errors import CdcError, ConfigError, ConfigProblem, MissingDependencyError
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client, security_settings
from airflow_cdc.engine.signals import parse_signal
from airflow_cdc.engine.signals.channels import CONSUMER_PREFIX as SIGNAL_CONSUMER_PREFIX
from airflow_cdc.engine.sources.database import check_signal_table
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.hooks.source_config import from_connection

CHANNELS = ("api", "source", "kafka")
#: The engine's default ``signal.enabled.channels``.
DEFAULT_CHANNELS = ("source", "api")
#: Debezium's signal table holds ``data varchar(2048)``.
MAX_TABLE_DATA = 2048


def _listed(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def enabled_channels(config: Mapping[str, Any]) -> tuple[str, ...]:
    if "signal.enabled.channels" not in config:
        return DEFAULT_CHANNELS
    return _listed(config["signal.enabled.channels"])


class CdcSignalHook(BaseHook):
    """Sends Debezium signals to the engine instance of a ``cdc_engine`` connection.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param source_conn_id: for the ``source`` channel: a ``postgres`` or ``mysql`` connection
        to the captured database, whose user may insert into the signal table.
    :param kafka_bootstrap_servers: for the ``kafka`` channel: the brokers, when they are not
        the instance's ``signal.kafka.bootstrap.servers``.
    :param kafka_conn_id: for the ``kafka`` channel: an Airflow ``kafka`` connection whose
        extra holds client settings (``sasl.password``, ...) over the instance's
        ``signal.consumer.*`` security settings, which its API gives without passwords; one
        that names ``bootstrap.servers`` is used alone.
    """

    conn_name_attr = "cdc_conn_id"
    default_conn_name = CdcEngineHook.default_conn_name
    conn_type = CdcEngineHook.conn_type
    hook_name = "CDC signals (airflow-cdc)"

    def __init__(
        self,
        cdc_conn_id: str = default_conn_name,
        *,
        source_conn_id: str | None = None,
        kafka_bootstrap_servers: str | None = None,
        kafka_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cdc_conn_id = cdc_conn_id
        self.source_conn_id = source_conn_id
        self.kafka_bootstrap_servers = kafka_bootstrap_servers
        self.kafka_conn_id = kafka_conn_id
        #: The channel the last signal went on (``api`` becomes another on Kafka Connect).
        self.last_channel: str | None = None

    @cached_property
    def engine_hook(self) -> CdcEngineHook:
        return CdcEngineHook(self.cdc_conn_id)

    def get_conn(self) -> CdcEngineHook:
        return self.engine_hook

    def send(
        self,
        kind: str,
        data: Mapping[str, Any] | None = None,
        *,
        channel: str = "api",
        signal_id: str | None = None,
    ) -> str:
        """Send one signal (``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``,
        ``resume-snapshot``, ``log``); its id, which the instance's notifications about it carry.
        On the ``kafka`` channel the id is ``<topic>-<partition>-<offset>``, as Debezium names it."""
        if channel not in CHANNELS:
            raise ConfigError(
                [ConfigProblem("channel", f"{channel!r} is not a signal channel", "use api, source or kafka")]
            )
        payload = dict(data or {})
        parse_signal(signal_id or "airflow", kind, payload, channel)  # SignalError: the engine's own words
        with self.engine_hook.get_backend() as backend:
            if channel == "api" and not backend.capabilities.api_signals:
                channel = self._connect_channel()  # Debezium on Connect has no API channel
            self.last_channel = channel
            if channel == "api":
                return backend.signal(kind, payload, signal_id=signal_id)
            config = backend.running_config()
        if channel not in enabled_channels(config):
            raise ConfigError(
                [
                    ConfigProblem(
                        "signal.enabled.channels",
                        f"instance {config.get('name')!r} does not listen on the {channel} channel "
                        f"(it listens on: {', '.join(enabled_channels(config)) or 'none'})",
                        f"add {channel} to the instance's signal.enabled.channels and restart it, or use channel='api'",
                    )
                ]
            )
        if channel == "source":
            return self._to_signal_table(config, kind, payload, signal_id or str(uuid.uuid4()))
        return self._to_kafka(config, kind, payload)

    def _connect_channel(self) -> str:
        """Debezium on Kafka Connect has no API channel: a DAG's ``api`` signal goes into the
        signal table over the source connection (the hook's, or the ``kafka_connect``
        connection's ``source_conn_id``), else onto the Kafka channel if the connector has one."""
        settings = self.engine_hook.settings
        self.source_conn_id = self.source_conn_id or settings.source_conn_id
        config = self.engine_hook.running_config()
        if self.source_conn_id and "source" in enabled_channels(config):
            self.log.info("Kafka Connect: the signal goes into the signal table (Debezium has no API channel)")
            return "source"
        if config.get("signal.kafka.topic") and "kafka" in enabled_channels(config):
            self.log.info("Kafka Connect: the signal goes onto the Kafka signal channel (Debezium has no API channel)")
            return "kafka"
        raise ConfigError(
            [
                ConfigProblem(
                    self.cdc_conn_id,
                    "is a Debezium connector on Kafka Connect, which has no API signal channel",
                    'set the connection\'s extra "source_conn_id" (the signal table is written over it), or send '
                    "on channel='source' / 'kafka'",
                )
            ]
        )

    # -- the signal table ------------------------------------------------------------------------
    def _to_signal_table(self, config: Mapping[str, Any], kind: str, data: Mapping[str, Any], signal_id: str) -> str:
        table = str(config.get("signal.data.collection") or "")
        if not table:
            raise ConfigError(
                [
                    ConfigProblem(
                        "signal.data.collection",
                        f"instance {config.get('name')!r} has no signal table",
                        "set signal.data.collection (e.g. public.debezium_signal; MySQL: shop.debezium_signal) and "
                        "restart it, or use channel='api'",
                    )
                ]
            )
        check_signal_table(table)
        if not self.source_conn_id:
            raise ConfigError(
                [ConfigProblem("source_conn_id", "is not set", "give the source database's connection id")]
            )
        source = from_connection(self.get_connection(self.source_conn_id))
        text = orjson.dumps(data).decode()
        if len(text) > MAX_TABLE_DATA:
            raise ConfigError(
                [
                    ConfigProblem(
                        "data",
                        f"is {len(text)} characters; the signal table's data column holds {MAX_TABLE_DATA}",
                        "use channel='api', or fewer tables and shorter filters",
                    )
                ]
            )
        # The source says which database the table's name means (PostgreSQL's
        # "<database>.<schema>.<table>", MySQL's "<database>.<table>") and writes the row.
        database = source_database(source.properties["connector.class"])
        assert database is not None  # every source connection maps to a database's connector
        name_database, name = database.signal_target(table, config, source.properties)
        try:
            with database.connect(source.properties, source.password, database=name_database) as conn:
                database.write_signal(conn, name, signal_id, kind, text)
        except CdcError:
            raise
        except Exception as exc:  # the driver's own error: its message says what the server said
            raise CdcError(
                f"writing signal {signal_id!r} into {table} over connection {self.source_conn_id!r} failed: "
                f"{type(exc).__name__}: {exc}".strip()
            ) from None
        self.log.info("signal %s (%s) written to %s", signal_id, kind, table)
        return signal_id

    # -- the Kafka topic ---------------------------------------------------------------------------
    def _to_kafka(self, config: Mapping[str, Any], kind: str, data: Mapping[str, Any]) -> str:
        topic = str(config.get("signal.kafka.topic") or "")
        servers = self.kafka_bootstrap_servers or str(config.get("signal.kafka.bootstrap.servers") or "")
        if not topic or not servers:
            raise ConfigError(
                [
                    ConfigProblem(
                        "signal.kafka.topic" if not topic else "signal.kafka.bootstrap.servers",
                        f"is not set on instance {config.get('name')!r}",
                        "set signal.kafka.topic and signal.kafka.bootstrap.servers, restart it; or use channel='api'",
                    )
                ]
            )
        try:
            from kafka import KafkaProducer
            from kafka.errors import KafkaError
        except ImportError:  # pragma: no cover - kafka-python is a core dependency
            raise MissingDependencyError("kafka-python", "kafka") from None
        key = str(config.get("topic.prefix") or "")
        client = self._kafka_client(config, servers)
        try:
            # A refused login is a ConfigError naming the setting (open_client).
            producer = open_client(KafkaProducer, {**client, "acks": "all", "max_block_ms": 10_000}, setting_prefix="")
        except KafkaError as exc:
            raise CdcError(f"cannot reach Kafka at {servers} for the signal topic {topic}: {exc}") from None
        try:
            sent = producer.send(topic, key=key.encode(), value=orjson.dumps({"type": kind, "data": data}))
            metadata = sent.get(timeout=30)
        except KafkaError as exc:
            raise CdcError(f"Kafka at {servers} did not take the signal on {topic}: {exc}") from None
        finally:
            producer.close(timeout=5)
        signal_id = f"{metadata.topic}-{metadata.partition}-{metadata.offset}"
        self.log.info("signal %s (%s) sent to Kafka topic %s", signal_id, kind, topic)
        return signal_id

    def _kafka_client(self, config: Mapping[str, Any], servers: str) -> dict[str, Any]:
        """kafka-python arguments: the channel's security settings (Debezium's
        ``signal.consumer.*``: the signal topic's cluster), with the Kafka connection's over them."""
        from kafka import KafkaProducer

        settings = {"bootstrap.servers": servers, **security_settings(config, SIGNAL_CONSUMER_PREFIX)}
        if self.kafka_conn_id:
            extra = self.get_connection(self.kafka_conn_id).extra_dejson
            settings = {**({} if extra.get("bootstrap.servers") else settings), **extra}
        return kafka_python_config(settings, KafkaProducer.DEFAULT_CONFIG, strict=False)
