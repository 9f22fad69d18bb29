"""Reset or seek the offsets of a stopped engine instance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.engine.errors import RefusedError, SeekRefusedError
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
    :param force: for ``seek``: do not check ``position`` against the source server's current
        one (a seek past it, or to a server that cannot be reached, is refused otherwise).
    :param source_conn_id: for ``seek``: the source database's connection, whose password reaches
        the server for that check (default: the ``cdc_engine`` connection's ``source_conn_id``).
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
        force: bool = False,
        source_conn_id: str | None = None,
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
        self.force = force
        self.source_conn_id = source_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        partition = dict(self.partition) if isinstance(self.partition, Mapping) else None
        action = f"{self.action} of the offsets of connection {self.cdc_conn_id!r}'s instance"
        with self.failures(action), self.hook.get_backend() as backend:
            self.remember_status_url(backend)
            try:
                if self.action == "reset":
                    removed = backend.reset_offsets(partition)
                    self.log.info("offsets reset: %s", removed)
                    return {"action": "reset", "removed": removed}
                changed = backend.seek(str(self.position), partition, force=self.force, password=self._password())
            except SeekRefusedError as exc:  # past the source server's position, or no server to ask
                raise CdcOperatorError(f"{exc}; force=True seeks without the check") from exc
            except RefusedError as exc:  # it runs: its next commit would overwrite the change
                message = getattr(exc, "message", None) or str(exc)
                raise CdcOperatorError(f"{message}; in a DAG: CdcStopEngineOperator first") from exc
        self.log.info("offset of %s set to %s (was %s)", changed["partition"], changed["position"], changed["before"])
        return {"action": "seek", **changed}

    def _password(self) -> str | None:
        """The source connection's password, which reaches the server to check the position."""
        from airflow_cdc.hooks.source_config import from_connection

        conn_id = self.source_conn_id or self.hook.settings.source_conn_id
        if self.force or not conn_id:
            return None
        return from_connection(self.hook.get_connection(conn_id)).password
