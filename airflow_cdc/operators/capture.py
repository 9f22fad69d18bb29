"""Bounded capture: the engine runs inside the task until a bound, commits and stops."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import Context

from airflow_cdc.assets import collection_of_topic, emit_table_events
from airflow_cdc.backends import CaptureBounds, check_config_argument
from airflow_cdc.hooks.source_config import engine_config, from_connection
from airflow_cdc.operators.base import CdcBaseOperator
from airflow_cdc.operators.engine import table_lineage


class CdcCaptureOperator(CdcBaseOperator):
    """Capture changes for a while inside the task: micro-batch CDC on a schedule, without a
    long-running instance.

    The engine of the ``cdc_engine`` connection's instance (its config file, extra
    ``config_path``, with ``config`` over it and ``source_conn_id``'s host, user, password and
    database) runs in the task until ``max_records`` are committed, ``max_duration`` has
    passed or ``target_position`` is committed - whichever comes first - then delivers what is
    in flight, commits and stops. Each run goes on from the offsets the previous one committed,
    into the instance's sink. Refused while the instance runs detached.

    Tables that moved data get asset events (URIs ``cdc://<topic.prefix>/<schema>.<table>``,
    ``extra`` ``{"rows", "offsets"}``): list an ``AssetAlias`` in ``outlets`` for an event per
    table that moved rows, or the tables' assets (``airflow_cdc.assets.table_asset``) for an
    event each on every run (``rows`` 0 when nothing moved).

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``, with ``config_path``).
    :param config: Debezium properties over the config file (templated); no secrets, no
        ``name`` or ``state.dir``.
    :param source_conn_id: a ``postgres`` (or ``mysql``) connection to the captured database.
    :param max_records: stop once this many records are committed (a batch more at most).
    :param max_duration: stop after this long (seconds or a ``timedelta``), from the engine's start.
    :param target_position: stop once this position is committed (templated), as the source
        writes positions: a PostgreSQL LSN such as ``0/16B3748``, a MariaDB GTID position
        ``0-1-42``, a MySQL GTID set ``uuid:1-5`` or a binlog ``file:pos``.
    :return: (XCom) ``{"name", "run_id", "stopped_by", "records", "rows", "offsets",
        "duration_s"}``: ``rows`` by table, ``offsets`` each partition's committed offset and
        position.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "config", "source_conn_id", "target_position")
    template_fields_renderers = {"config": "json"}

    def __init__(
        self,
        *,
        config: dict[str, Any] | None = None,
        source_conn_id: str | None = None,
        max_records: int | None = None,
        max_duration: float | timedelta | None = None,
        target_position: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_config_argument(config)
        seconds = max_duration.total_seconds() if isinstance(max_duration, timedelta) else max_duration
        problems = CaptureBounds(max_records, seconds, target_position).problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.config = config
        self.source_conn_id = source_conn_id
        self.max_records = max_records
        self.max_duration = seconds
        self.target_position = target_position

    def execute(self, context: Context) -> dict[str, Any]:
        action = f"bounded capture of connection {self.cdc_conn_id!r}'s instance"
        with self.failures(action), self.hook.get_backend() as backend:
            if not backend.capabilities.bounded_capture:
                backend.run_until({}, None)  # refused, naming what the connection lacks
            source = from_connection(self.hook.get_connection(self.source_conn_id)) if self.source_conn_id else None
            check_config_argument(self.config)
            props = engine_config(self.hook.instance_config, source=source, overrides=self.config)
            self.remember_status_url(backend)
            bounds = CaptureBounds(self.max_records, self.max_duration, self.target_position or None)
            result = backend.run_until(source.with_secret(props) if source else props, bounds)
        prefix = str(props.get("topic.prefix") or "")
        rows: dict[str, int] = {}
        for topic, count in result.topic_rows.items():
            collection = collection_of_topic(topic, prefix, props)
            if collection is not None:
                rows[collection] = rows.get(collection, 0) + count
        if self.outlets and prefix:
            emit_table_events(context, self.outlets, prefix, rows, {"offsets": result.offsets})
        self.lineage_inputs, self.lineage_outputs = table_lineage(props, sorted(rows))
        self.log.info(
            "captured %d record(s) in %.1fs, stopped by %s; rows by table: %s",
            result.records,
            result.duration_s,
            result.stopped_by,
            rows,
        )
        return {
            "name": result.name,
            "run_id": result.run_id,
            "stopped_by": result.stopped_by,
            "records": result.records,
            "rows": rows,
            "offsets": result.offsets,
            "duration_s": result.duration_s,
        }
