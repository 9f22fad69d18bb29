"""Reset or seek the offsets of a stopped engine instance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.engine.errors import ApiRefusedError, RefusedError
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.server import offsets_admin
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance_files import state_dir
from airflow_cdc.hooks.engine import EFFECTIVE_CONFIG
from airflow_cdc.operators.base import CdcBaseOperator, CdcOperatorError

ACTIONS = ("reset", "seek")


class CdcOffsetsOperator(CdcBaseOperator):
    """Reset or seek the committed offsets of an engine instance beside the worker.

    Refused while the instance runs (its next commit would overwrite the change, as Kafka
    Connect refuses it for a running connector): stop it first with ``CdcStopEngineOperator``.
    ``reset`` forgets the offsets, so the next start is a first start (a new snapshot, as
    ``snapshot.mode`` says); ``seek`` makes the next start resume right after ``position``,
    written as the source writes positions (a PostgreSQL LSN such as ``0/16B3748``; a MariaDB
    GTID position ``0-1-42``, a MySQL GTID set ``uuid:1-5`` or a binlog ``file:pos``), which the
    engine's position codec reads. The instance's configuration is the one it was last started
    with by ``CdcStartEngineOperator`` (``<state.dir>/airflow-instance.yaml``), else its config
    file.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``, with ``config_path``).
    :param action: ``reset`` or ``seek``.
    :param position: for ``seek``: where to resume after (templated).
    :param partition: the source partition to change (templated), e.g. ``{"server": "shop"}``;
        needed only when the offset store holds several (``reset`` without it resets all).
    :return: (XCom) ``reset``: ``{"action", "removed"}``; ``seek``: ``{"action", "partition",
        "before", "offset", "position"}``.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "position", "partition")

    def __init__(
        self,
        *,
        action: str,
        position: str | None = None,
        partition: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        if action == "seek" and not position:
            raise ValueError(
                "action='seek' needs a position as the source writes it, e.g. position='0/16B3748' (PostgreSQL), "
                "'0-1-42' (a MariaDB GTID position) or 'mysql-bin.000003:154' (a binlog position)"
            )
        if action == "reset" and position:
            raise ValueError("action='reset' takes no position; use action='seek' to resume after one")
        self.action = action
        self.position = position
        self.partition = partition

    def execute(self, context: Context) -> dict[str, Any]:
        with self.failures(f"{self.action} of the offsets of connection {self.cdc_conn_id!r}'s instance"):
            if self.hook.settings.kafka_connect or not self.hook.settings.config_path:
                try:
                    return self._through_api()
                except ApiRefusedError as exc:  # the connector (or the served engine) runs
                    raise CdcOperatorError(f"{exc.message}; in a DAG: CdcStopEngineOperator first") from exc
            props = self._last_config()
            self.remember_status_url()
            partition = dict(self.partition) if isinstance(self.partition, Mapping) else None
            try:
                if self.action == "reset":
                    removed = offsets_admin.reset(props, partition)
                    self.log.info("offsets reset: %s", removed)
                    return {"action": "reset", "removed": removed}
                offset = offsets_admin.position_offset(props, str(self.position))
                changed = offsets_admin.set_offset(props, offset, partition)
            except RefusedError as exc:
                raise CdcOperatorError(f"{exc}; in a DAG: CdcStopEngineOperator first") from exc
        position = codec_for(props).format(changed["offset"])
        self.log.info("offset of %s set to %s (was %s)", changed["partition"], position, changed["before"])
        return {"action": "seek", **changed, "position": position}

    def _through_api(self) -> dict[str, Any]:
        """A connector on Kafka Connect, or an engine service reached through its URL: Kafka
        Connect's offsets API (KIP-875), which refuses while the connector (the engine) is not
        stopped (``CdcStopEngineOperator`` stops it)."""
        with self.hook.get_client() as client:
            name = self.hook.settings.instance or client.status().name
            self.instance_status_url = f"{client.url}/connectors/{name}/status"
            if self.action == "reset":
                removed = client.reset_offsets()
                self.log.info("offsets reset: %s", removed)
                return {"action": "reset", "removed": removed}
            config = dict(client.connector(name).get("config") or {})
            offset = offsets_admin.position_offset(config, str(self.position))
            entries = client.offsets()
            partition: dict[str, Any] | None = dict(self.partition) if isinstance(self.partition, Mapping) else None
            if partition is None:
                partition = dict(entries[0].partition) if len(entries) == 1 else {"server": config.get("topic.prefix")}
            before = next((e.offset for e in entries if e.partition == partition), None)
            client.alter_offsets([{"partition": partition, "offset": offset}])
        position = codec_for(config).format(offset)
        self.log.info("offset of %s set to %s (was %s)", partition, position, before)
        return {"action": "seek", "partition": partition, "before": before, "offset": offset, "position": position}

    def _last_config(self) -> dict[str, Any]:
        props = self.hook.instance_config
        effective = state_dir(props) / EFFECTIVE_CONFIG
        return load_config_file(effective) if effective.exists() else props
