"""Airflow assets and lineage for captured tables (ADR 0011).

**The URI scheme.** A captured table is the asset ``cdc://<topic.prefix>/<data collection>``:
``topic.prefix`` is the instance's logical server name (the first part of every topic it
writes), the data collection is the rest of the table's topic - what Debezium's signals call a
data collection: ``<schema>.<table>`` for PostgreSQL (``<database>.<schema>.<table>`` with
``database.names``), ``<database>.<table>`` for MySQL. So the table whose changes go to the
topic ``shop.public.orders`` is ``cdc://shop/public.orders``, whichever engine captured it (the
embedded one or Debezium on Kafka Connect). Names are percent-encoded where a URI needs it.

**Events.** A bounded capture that moved rows and a completed snapshot emit an event per table
with ``extra`` ``{"rows", "offsets"}`` (and ``"signal_id"`` for a snapshot), through the
task's ``outlets`` (:func:`emit_table_events`): each table asset listed there gets its
``extra`` (``rows`` 0 when nothing moved: Airflow emits an event for every listed asset), and an
``AssetAlias`` listed there gets one event per table that moved data - the way to schedule
downstream DAGs on the tables that really changed.

**Lineage.** :func:`operator_lineage` builds OpenLineage's ``OperatorLineage`` (source tables in,
topics out) when Airflow's openlineage provider is installed, and None otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from airflow.sdk import Asset, AssetAlias, AssetWatcher

from airflow_cdc.engine.notifications import Notification

SCHEME = "cdc"
#: The signal table's rows and watermarks are events too, but no data of their own.
_NOT_DATA = "signal.data.collection"


def table_uri(topic_prefix: str, collection: str) -> str:
    """``cdc://<topic.prefix>/<data collection>``."""
    if not topic_prefix or not collection:
        raise ValueError("a table asset needs a topic.prefix and a data collection such as public.orders")
    return f"{SCHEME}://{quote(topic_prefix, safe='')}/{quote(collection, safe='.')}"


def table_asset(topic_prefix: str, collection: str, watchers: Sequence[AssetWatcher] = ()) -> Asset:
    """The asset of one captured table (see the module's scheme); ``watchers`` (an
    ``AssetWatcher`` of ``airflow_cdc.triggers.table_changes``) make events of its changes."""
    if watchers:
        return Asset(uri=table_uri(topic_prefix, collection), watchers=list(watchers))
    return Asset(uri=table_uri(topic_prefix, collection))


def parse_table_uri(uri: str) -> tuple[str, str] | None:
    """``(topic.prefix, data collection)`` of a ``cdc://`` URI; None for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or not parts.netloc or not parts.path.strip("/"):
        return None
    return unquote(parts.netloc), unquote(parts.path.strip("/"))


def collection_of_topic(topic: str, topic_prefix: str, config: Mapping[str, Any] | None = None) -> str | None:
    """The data collection whose changes go to ``topic`` (None for a topic that carries no
    table's rows: heartbeats, transactions, messages, the signal table, a renamed topic)."""
    head = f"{topic_prefix}."
    if not topic.startswith(head):
        return None
    collection = topic[len(head) :]
    if "." not in collection:  # <prefix>.transaction, <prefix>.message
        return None
    signal_table = str((config or {}).get(_NOT_DATA) or "")
    if signal_table and (collection == signal_table or collection.endswith(f".{signal_table}")):
        return None
    return collection


def emit_table_events(
    context: Mapping[str, Any],
    outlets: Sequence[Any],
    topic_prefix: str,
    rows: Mapping[str, int],
    extra: Mapping[str, Any] | None = None,
) -> list[str]:
    """Record asset events for captured tables in ``context["outlet_events"]``.

    ``rows`` maps data collections to the rows moved; ``extra`` (JSON values: offsets, a
    signal id) is added to every event. A table asset among ``outlets`` gets ``{"rows", **extra}``
    (0 rows when the table is not in ``rows``); an ``AssetAlias`` gets one event per table of
    ``rows`` with rows, naming the table's asset. Returns the URIs that got an event with rows.
    """
    events = context["outlet_events"]
    common = dict(extra or {})
    moved: list[str] = []
    for outlet in outlets:
        if isinstance(outlet, AssetAlias):
            for collection, count in sorted(rows.items()):
                if count > 0:
                    asset = table_asset(topic_prefix, collection)
                    events[outlet].add(asset, extra={"rows": count, **common})
                    moved.append(asset.uri)
        elif isinstance(outlet, Asset) and (parsed := parse_table_uri(outlet.uri)) and parsed[0] == topic_prefix:
            count = int(rows.get(parsed[1], 0))
            events[outlet].extra = {"rows": count, **common}
            if count > 0:
                moved.append(outlet.uri)
    return sorted(set(moved))


def snapshot_rows(notifications: Iterable[Notification], signal_id: str) -> dict[str, int]:
    """Rows per table of the snapshot ``signal_id``, from its TABLE_SCAN_COMPLETED
    notifications (for the snapshot sensor's asset events)."""
    rows: dict[str, int] = {}
    for notification in notifications:
        if notification.id != signal_id or notification.type != "TABLE_SCAN_COMPLETED":
            continue
        data = notification.additional_data
        table = data.get("scanned_collection") or data.get("data_collection") or ""
        if table:
            rows[table] = rows.get(table, 0) + int(data.get("total_rows_scanned") or 0)
    return rows


def sink_dataset(config: Mapping[str, Any], topic: str) -> tuple[str, str] | None:
    """OpenLineage's ``(namespace, name)`` of a topic where the instance's sink writes it."""
    sink = str(config.get("sink.type") or "changelog")
    if sink == "kafka":
        servers = str(config.get("sink.kafka.producer.bootstrap.servers") or "")
        return (f"kafka://{servers.split(',')[0].strip()}", topic) if servers else None
    if sink == "changelog":
        directory = str(config.get("sink.changelog.dir") or "")
        return ("file", f"{directory.rstrip('/')}/{topic}") if directory else None
    return None


def operator_lineage(inputs: Iterable[tuple[str, str]], outputs: Iterable[tuple[str, str]]) -> Any:
    """OpenLineage's ``OperatorLineage`` of ``(namespace, name)`` datasets; None when the
    openlineage provider is not installed (it is optional) or there is nothing to report."""
    inputs, outputs = list(inputs), list(outputs)
    if not inputs and not outputs:
        return None
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage  # type: ignore[import-not-found]
        from openlineage.client.event_v2 import Dataset  # type: ignore[import-not-found]
    except ImportError:
        return None
    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )
