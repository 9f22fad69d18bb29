"""The MySQL/MariaDB connector's configuration, with Debezium's property names and defaults
(except ``heartbeat.interval.ms``: on by default here, as for PostgreSQL)."""

from __future__ import annotations

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.connect_schema import CONVERTER_CONFIG
from airflow_cdc.engine.failures import FAILURE_MODE_ALIASES, FAILURE_MODES
from airflow_cdc.engine.mysql_client import SSL_MODES
from airflow_cdc.engine.signals.channels import SIGNAL_FIELDS
from airflow_cdc.engine.snapshots.coordinator import INCREMENTAL_SNAPSHOT_FIELDS
from airflow_cdc.engine.sources.patterns import RegexList
from airflow_cdc.engine.transaction_monitor import TRANSACTION_FIELDS

MYSQL_CONFIG = ConfigDef(
    [
        Field("topic.prefix", doc="Logical name of the server; the prefix of every topic.", fix="set topic.prefix"),
        Field("database.hostname", default="127.0.0.1"),
        Field("database.port", type="int", default=3306, minimum=1),
        Field("database.user", default="root"),
        Field("database.password", default=""),
        Field(
            "database.ssl.mode",
            default="preferred",
            choices=SSL_MODES,
            doc="disabled, preferred (TLS only with a trust or key store), required, verify_ca, verify_identity.",
        ),
        Field(
            "database.ssl.truststore", default="", doc="PEM file of the CAs the server's certificate is checked with."
        ),
        Field("database.ssl.truststore.password", default="", doc="Accepted for Debezium; a PEM file needs none."),
        Field("database.ssl.keystore", default="", doc="PEM file: the client's key and certificate (REQUIRE X509)."),
        Field("database.ssl.keystore.password", default="", doc="The password of an encrypted key in the keystore."),
        Field(
            "database.server.id",
            type="int",
            default=0,
            minimum=0,
            doc="This replica's server id, unique among the server's replicas (0: derived from topic.prefix).",
        ),
        RegexList("database.include.list", default=[]),
        RegexList("database.exclude.list", default=[]),
        RegexList("table.include.list", default=[]),
        RegexList("table.exclude.list", default=[]),
        # The source type as schema parameters (__debezium.source.column.*), by
        # database.table.column and by database.table.TYPE: with schemas enabled (connect_schema.py).
        RegexList("column.propagate.source.type", default=[]),
        RegexList("datatype.propagate.source.type", default=[]),
        Field(
            "snapshot.mode",
            default="initial",
            choices=("initial", "initial_only", "no_data", "when_needed"),
            aliases={"never": "no_data", "schema_only": "no_data"},
        ),
        Field("snapshot.fetch.size", type="int", default=10240, minimum=1),
        Field("decimal.handling.mode", default="precise", choices=("precise", "double", "string")),
        Field(
            "time.precision.mode",
            default="adaptive_time_microseconds",
            choices=("adaptive_time_microseconds", "connect"),
        ),
        Field("bigint.unsigned.handling.mode", default="long", choices=("long", "precise")),
        Field("binary.handling.mode", default="bytes", choices=("bytes", "base64", "base64-url-safe", "hex")),
        Field(
            "heartbeat.interval.ms",
            type="int",
            default=10_000,
            minimum=0,
            doc="Move the committed position this often on an idle or filtered stream (0: off).",
        ),
        Field("tombstones.on.delete", type="bool", default=True),
        Field(
            "event.processing.failure.handling.mode",
            default="fail",
            choices=FAILURE_MODES,
            aliases=FAILURE_MODE_ALIASES,
            doc="A row the engine cannot decode or convert: fail (stop, naming the table, column and position), "
            "warn (log it and leave the event out) or skip (leave it out).",
        ),
        Field(
            "include.schema.changes",
            type="bool",
            default=True,
            doc="Emit schema change events (the snapshot's and the stream's DDL) on the topic named topic.prefix.",
        ),
        Field("skipped.operations", type="list", default=["t"]),
        Field("max.batch.size", type="int", default=2048, minimum=1),
        Field("poll.interval.ms", type="int", default=500, minimum=0),
        Field(
            "schema.history.internal.file.filename",
            default="",
            doc="The schema history (JSON lines); default: beside the file offset store, else in memory.",
        ),
        Field(
            "signal.data.collection",
            default="",
            doc="The signal table, database.table: (id varchar(42) primary key, type varchar(32) not null, "
            "data varchar(2048)).",
        ),
        *SIGNAL_FIELDS,
        *TRANSACTION_FIELDS,
        *INCREMENTAL_SNAPSHOT_FIELDS,
        Field(
            "read.only",
            type="bool",
            default=False,
            doc="Incremental snapshots write nothing to the database: each chunk's window is bounded by the "
            "server's executed GTID set before and after its read (Debezium's read-only incremental snapshot; "
            "needs GTIDs: MySQL gtid_mode=ON, MariaDB 10.0+). Send signals through the api, file or kafka channel.",
        ),
    ]
).merged(CONVERTER_CONFIG)
