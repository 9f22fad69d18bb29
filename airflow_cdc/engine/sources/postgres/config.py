"""The PostgreSQL connector's configuration, with Debezium's property names and defaults
(except ``heartbeat.interval.ms``: on by default here, see the README)."""

from __future__ import annotations

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.connect_schema import CONVERTER_CONFIG
from airflow_cdc.engine.signals.channels import SIGNAL_FIELDS
from airflow_cdc.engine.snapshots.coordinator import INCREMENTAL_SNAPSHOT_FIELDS
from airflow_cdc.engine.sources.patterns import RegexList
from airflow_cdc.engine.transaction_monitor import TRANSACTION_FIELDS

POSTGRES_CONFIG = ConfigDef(
    [
        Field(
            "topic.prefix",
            doc="Logical name of the server; the prefix of every topic.",
            fix="set topic.prefix, e.g. topic.prefix=inventory",
        ),
        Field("database.hostname", default="127.0.0.1"),
        Field("database.port", type="int", default=5432, minimum=1),
        Field("database.user", default="postgres"),
        Field("database.password", default=""),
        Field("database.dbname", default="", doc="The database to capture."),
        Field(
            "database.names",
            type="list",
            default=[],
            doc="Several databases: one task, slot and offset partition per database.",
        ),
        Field("database.sslmode", default="prefer", doc="libpq's sslmode: disable, prefer, require, verify-ca, ..."),
        # Debezium's TLS files, passed to libpq for every connection the connector opens
        # (catalog, replication, snapshot, incremental snapshot reads, signal table).
        Field("database.sslrootcert", default="", doc="PEM file of the CA that signed the server's certificate."),
        Field("database.sslcert", default="", doc="PEM file of the client certificate (cert authentication)."),
        Field("database.sslkey", default="", doc="The client certificate's key (owner-only file mode, as libpq asks)."),
        Field("database.sslpassword", default="", doc="The password of an encrypted database.sslkey."),
        Field("slot.name", default="debezium"),
        Field("publication.name", default="dbz_publication"),
        Field("publication.autocreate.mode", default="all_tables", choices=("all_tables", "filtered", "disabled")),
        Field("plugin.name", default="pgoutput", choices=("pgoutput",)),
        Field("slot.drop.on.stop", type="bool", default=False),
        RegexList("table.include.list", default=[]),
        RegexList("table.exclude.list", default=[]),
        RegexList("column.exclude.list", default=[]),
        # The source type as schema parameters (__debezium.source.column.*), by
        # schema.table.column and by schema.table.type: with schemas enabled (connect_schema.py).
        RegexList("column.propagate.source.type", default=[]),
        RegexList("datatype.propagate.source.type", default=[]),
        Field(
            "snapshot.mode",
            default="initial",
            choices=("initial", "initial_only", "no_data", "when_needed", "always"),
            aliases={"never": "no_data"},
        ),
        Field("decimal.handling.mode", default="precise", choices=("precise", "double", "string")),
        Field("time.precision.mode", default="adaptive", choices=("adaptive", "adaptive_time_microseconds", "connect")),
        Field("binary.handling.mode", default="bytes", choices=("bytes", "base64", "base64-url-safe", "hex")),
        Field("interval.handling.mode", default="numeric", choices=("numeric", "string")),
        Field("money.fraction.digits", type="int", default=2, minimum=0),
        Field(
            "hstore.handling.mode",
            default="json",
            choices=("json", "map"),
            doc="hstore values as a JSON string (keys in Debezium's order) or as a JSON object.",
        ),
        Field(
            "include.unknown.datatypes",
            type="bool",
            default=False,
            doc="Emit columns of types Debezium has no schema for (pg_lsn, xid, tsquery, domain arrays, ...) "
            "as their text's bytes in the binary.handling.mode; left out otherwise.",
        ),
        Field(
            "heartbeat.interval.ms",
            type="int",
            default=10_000,
            minimum=0,
            doc="Emit a WAL message this often when nothing was captured, so the slot advances (0: off).",
        ),
        Field("heartbeat.action.query", default="", doc="Also run this statement on each heartbeat."),
        Field("tombstones.on.delete", type="bool", default=True),
        RegexList(
            "message.prefix.include.list",
            default=[],
            doc="Regexes on pg_logical_emit_message prefixes to emit as op=m events (default: every "
            "prefix but the engine's own heartbeat and watermark ones).",
        ),
        RegexList("message.prefix.exclude.list", default=[], doc="Message prefixes not to emit."),
        Field("skipped.operations", type="list", default=["t"], doc="Operations not emitted: c, u, d, t, or none."),
        Field("max.batch.size", type="int", default=2048, minimum=1),
        Field(
            "snapshot.fetch.size",
            type="int",
            default=10240,
            minimum=1,
            doc="Rows per fetch of the snapshot (Debezium's default).",
        ),
        Field("poll.interval.ms", type="int", default=500, minimum=0),
        Field(
            "signal.data.collection",
            default="",
            doc="The signal table, schema.table: (id varchar(42) primary key, type varchar(32) not null, "
            "data varchar(2048)).",
        ),
        *SIGNAL_FIELDS,
        *TRANSACTION_FIELDS,
        *INCREMENTAL_SNAPSHOT_FIELDS,
        Field(
            "read.only",
            type="bool",
            default=False,
            doc="Incremental snapshots write nothing: watermarks are WAL messages (pg_logical_emit_message).",
        ),
    ]
).merged(CONVERTER_CONFIG)
