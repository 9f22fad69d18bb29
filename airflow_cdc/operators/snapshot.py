"""Trigger, stop, pause and resume snapshots of an engine instance through Debezium's signals."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from airflow_cdc.backends import EngineBackend
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.notifications import INCREMENTAL, Notification
from airflow_cdc.engine.signals.signal import EXECUTE, PAUSE, RESUME, SNAPSHOT_TYPES, STOP
from airflow_cdc.hooks.signal import CHANNELS, CdcSignalHook
from airflow_cdc.links import CdcInstanceLink, CdcSnapshotLink
from airflow_cdc.operators.base import CdcBaseOperator, CdcOperatorError
from airflow_cdc.operators.engine import literal_tables, table_lineage

CONTROL_ACTIONS = {"stop": STOP, "pause": PAUSE, "resume": RESUME}
#: What the instance publishes once it acted on a control signal (about the running snapshot;
#: a table that leaves it is reported scanned with status SKIPPED).
_ACTED = {STOP: ("ABORTED", "SKIPPED"), PAUSE: ("PAUSED",), RESUME: ("RESUMED",)}


def table_list(tables: str | Sequence[str] | None) -> list[str]:
    """Tables as a list: a list as is, a string split at commas."""
    if tables is None:
        return []
    items = tables.split(",") if isinstance(tables, str) else list(tables)
    return [str(t).strip() for t in items if str(t).strip()]


def conditions_list(conditions: Any, tables: Sequence[str]) -> list[dict[str, str]]:
    """Debezium's ``additional-conditions`` from what a DAG gives: a filter for every table
    (a string), a filter per table (a dict), or Debezium's own list."""
    if conditions is None or conditions == "" or conditions == []:
        return []
    if isinstance(conditions, str):
        return [{"data-collection": table, "filter": conditions} for table in tables]
    if isinstance(conditions, Mapping):
        return [{"data-collection": str(table), "filter": str(text)} for table, text in conditions.items()]
    return [dict(condition) for condition in conditions]


def _end_cursor(client: EngineBackend) -> str:
    """The cursor after every notification the instance kept so far."""
    page = client.notifications()
    while page.notifications:
        page = client.notifications(page.cursor)
    return page.cursor


class _SignalOperator(CdcBaseOperator):
    """Sends one signal and waits until the instance answered it."""

    def __init__(
        self,
        *,
        channel: str = "api",
        source_conn_id: str | None = None,
        kafka_conn_id: str | None = None,
        acceptance_timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, not {channel!r}")
        if channel == "source" and not source_conn_id:
            raise ValueError("channel='source' writes the signal table over source_conn_id: give it")
        if acceptance_timeout < 0:
            raise ValueError(f"acceptance_timeout must be seconds >= 0, not {acceptance_timeout!r}")
        self.channel = channel
        self.source_conn_id = source_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.acceptance_timeout = acceptance_timeout

    @cached_property
    def signal_hook(self) -> CdcSignalHook:
        return CdcSignalHook(self.cdc_conn_id, source_conn_id=self.source_conn_id, kafka_conn_id=self.kafka_conn_id)

    def send_and_await(self, kind: str, data: Mapping[str, Any], acted: Callable[[Notification, str], bool]) -> str:
        """Send, then read the instance's notifications until one shows it acted on the signal
        (``acted``); a rejection fails the task with the instance's reason."""
        with self.engine_backend() as client:
            cursor = _end_cursor(client)
        signal_id = self.signal_hook.send(kind, data, channel=self.channel)
        channel = self.signal_hook.last_channel or self.channel
        self.log.info("signal %s (%s) sent on the %s channel: %s", signal_id, kind, channel, dict(data))
        if self.acceptance_timeout:
            with self.engine_backend() as client:
                self._await(client, cursor, signal_id, acted)
        return signal_id

    def _await(
        self, client: EngineBackend, cursor: str, signal_id: str, acted: Callable[[Notification, str], bool]
    ) -> None:
        deadline = time.monotonic() + self.acceptance_timeout
        while True:
            page = client.notifications(cursor)
            for notification in page.notifications:
                if notification.type == "REJECTED" and notification.id == signal_id:
                    raise CdcOperatorError(
                        f"the instance rejected signal {signal_id}: {notification.additional_data.get('problem')}"
                        f" (fix: {self.rejection_fix})"
                    )
                if acted(notification, signal_id):
                    self.log.info("the instance acted on signal %s: %s", signal_id, notification.type)
                    return
            cursor = page.cursor
            if not page.notifications:
                if time.monotonic() >= deadline:
                    self.log.warning(
                        "no notification about signal %s within %.0fs (a snapshot running already takes the tables "
                        "in silently); the snapshot sensor will tell how it ends",
                        signal_id,
                        self.acceptance_timeout,
                    )
                    return
                time.sleep(0.2)

    rejection_fix = "correct the signal and run the task again"


class CdcSnapshotOperator(_SignalOperator):
    """Trigger a snapshot of tables of a running engine instance (Debezium's
    ``execute-snapshot`` signal); streaming goes on meanwhile.

    The task waits until the instance answered the signal: a rejection (a table that does not
    exist or is not captured, a filter that is not one predicate or that the database refuses)
    fails it with the instance's reason, and the instance keeps streaming. Wait for the
    snapshot's end with the snapshot sensor, on the signal id this task returns.

    A scheduled backfill re-reads a window of each table by filtering on the data interval::

        CdcSnapshotOperator(
            task_id="backfill",
            tables=["public.orders"],
            additional_conditions="updated_at >= '{{ data_interval_start }}' "
            "and updated_at < '{{ data_interval_end }}'",
        )

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param tables: the tables (``schema.table``; Debezium reads them as regular expressions),
        a list or a comma-separated string (templated).
    :param snapshot_type: ``incremental`` (chunks between watermarks, while streaming) or
        ``blocking`` (streaming waits).
    :param additional_conditions: which rows (templated): one SQL predicate for every table
        (a string), one per table (``{"public.orders": "status = 'open'"}``), or Debezium's list
        ``[{"data-collection": ..., "filter": ...}]``.
    :param surrogate_key: a column to chunk by instead of the primary key.
    :param channel: how the signal travels: ``api`` (the control API), ``source`` (a row in the
        instance's signal table, over ``source_conn_id``) or ``kafka`` (its signal topic).
    :param source_conn_id: the source database's connection, for ``channel="source"``.
    :param kafka_conn_id: for ``channel="kafka"`` on a secured cluster: a ``kafka`` connection
        whose extra holds the client settings (``sasl.password``, ...) the instance's API leaves out.
    :param acceptance_timeout: seconds to wait for the instance's first answer (0: do not wait).
    :return: (XCom) the signal id, which the snapshot's notifications carry.
    """

    operator_extra_links = (CdcInstanceLink(), CdcSnapshotLink())

    template_fields: Sequence[str] = ("cdc_conn_id", "tables", "additional_conditions", "surrogate_key")
    template_fields_renderers = {"additional_conditions": "json"}
    rejection_fix = (
        "name captured tables as schema.table (MySQL: database.table; regular expressions), and give each filter "
        "as one SQL predicate over its table"
    )

    def __init__(
        self,
        *,
        tables: str | list[str],
        snapshot_type: str = "incremental",
        additional_conditions: str | dict[str, str] | list[dict[str, str]] | None = None,
        surrogate_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if snapshot_type not in SNAPSHOT_TYPES:
            raise ValueError(f"snapshot_type must be one of {', '.join(SNAPSHOT_TYPES)}, not {snapshot_type!r}")
        if not table_list(tables):
            raise ValueError("tables: name at least one table, e.g. ['public.orders']")
        self.tables = tables
        self.snapshot_type = snapshot_type
        self.additional_conditions = additional_conditions
        self.surrogate_key = surrogate_key

    def signal_data(self) -> dict[str, Any]:
        """The ``execute-snapshot`` signal's data (Debezium's keys), from the rendered arguments."""
        tables = table_list(self.tables)
        data: dict[str, Any] = {"data-collections": tables, "type": self.snapshot_type}
        conditions = conditions_list(self.additional_conditions, tables)
        if conditions:
            data["additional-conditions"] = conditions
        if self.surrogate_key:
            data["surrogate-key"] = self.surrogate_key
        return data

    def execute(self, context: Context) -> str:
        data = self.signal_data()
        config: Mapping[str, Any] = {}
        with self.failures(f"snapshot of {', '.join(data['data-collections'])}"):
            with contextlib.suppress(CdcError):  # only for a warning and lineage: never fails the task
                config = self.hook.running_config()
            self._warn_twice_read(config, data)
            signal_id = self.send_and_await(EXECUTE, data, lambda n, sid: n.id == sid)
        self.signal_id = signal_id  # for the snapshot link
        if config:
            self.lineage_inputs, self.lineage_outputs = table_lineage(config, literal_tables(data["data-collections"]))
        return signal_id

    def _warn_twice_read(self, config: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """An instance whose own snapshot.mode read the tables at start (``initial``, Debezium's
        default) reads every row again in a whole-table incremental snapshot: two ``r`` events per
        row. Harmless to the apply job, which is idempotent, but twice the work, and what a
        first DAG does by accident; a filtered or repeated snapshot means it."""
        mode = str(config.get("snapshot.mode") or "initial") if config else ""
        if mode in _READS_AT_START and self.snapshot_type == "incremental" and "additional-conditions" not in data:
            self.log.warning(
                "instance runs with snapshot.mode=%s, which read these tables when it started: this incremental "
                "snapshot reads every row again (each arrives twice). To read the tables once, by this snapshot, "
                "start the instance with config={'snapshot.mode': 'no_data'}",
                mode,
            )


#: snapshot.mode values whose instance reads the captured tables' rows when it starts.
_READS_AT_START = ("initial", "always", "when_needed", "initial_only")


class CdcSnapshotControlOperator(_SignalOperator):
    """Stop, pause or resume the incremental snapshot an engine instance runs (Debezium's
    ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot`` signals).

    The task waits until the instance acted on the signal; one it rejects (no snapshot runs,
    no table of it matches) fails the task with the instance's reason.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param action: ``stop``, ``pause`` or ``resume``.
    :param tables: with ``stop``: only these tables leave the snapshot (templated); none: all.
    :param channel: ``api``, ``source`` or ``kafka`` (see ``CdcSnapshotOperator``).
    :param source_conn_id: the source database's connection, for ``channel="source"``.
    :param kafka_conn_id: for ``channel="kafka"`` on a secured cluster: a ``kafka`` connection
        whose extra holds the client settings (``sasl.password``, ...) the instance's API leaves out.
    :param acceptance_timeout: seconds to wait for the instance's answer (0: do not wait).
    :return: (XCom) the signal id.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "tables")
    rejection_fix = "check that a snapshot is running (and, for stop, that it reads these tables)"

    def __init__(self, *, action: str, tables: str | list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if action not in CONTROL_ACTIONS:
            raise ValueError(f"action must be one of {', '.join(CONTROL_ACTIONS)}, not {action!r}")
        if tables and action != "stop":
            raise ValueError(f"tables are for action='stop' only; {action} concerns the whole snapshot")
        self.action = action
        self.tables = tables

    def execute(self, context: Context) -> str:
        kind = CONTROL_ACTIONS[self.action]
        tables = table_list(self.tables)
        data = {"data-collections": tables} if tables else {}
        answers = _ACTED[kind]

        def acted(notification: Notification, signal_id: str) -> bool:
            what = notification.type
            if what == "TABLE_SCAN_COMPLETED":
                what = notification.additional_data.get("status", "")
            return notification.aggregate_type == INCREMENTAL and what in answers

        with self.failures(f"{self.action} of the incremental snapshot"):
            return self.send_and_await(kind, data, acted)
