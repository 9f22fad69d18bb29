"""Prometheus metrics of an engine instance (prometheus-client), read from its status at each
scrape: nothing is counted twice and the record path pays nothing for them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from airflow_cdc.engine.server.instance import EngineInstance

STATES = ("CREATING", "INITIALIZING", "CREATING_TASKS", "STARTING_TASKS", "POLLING_TASKS", "STOPPING", "STOPPED")

#: Task status keys exported as counters and gauges: (status key, metric name, help).
TASK_COUNTERS = (
    ("polled", "airflow_cdc_events_polled", "Records polled from the source."),
    ("committed_records", "airflow_cdc_events_committed", "Records whose offsets are committed."),
    ("commits", "airflow_cdc_offset_commits", "Offset commits."),
)
TASK_GAUGES = (
    ("pending", "airflow_cdc_queue_pending_records", "Records polled and not yet delivered (queue depth)."),
    ("ms_behind_source", "airflow_cdc_milliseconds_behind_source", "Event time to processing time, last batch."),
)
#: Source metrics (``SourceTask.metrics()``) exported as gauges, by key.
SOURCE_GAUGES = {
    "lag_bytes": "Bytes of source log between the newest position seen and the committed one.",
    "snapshot_rows_scanned": "Rows read by the running snapshot.",
    "snapshot_total_rows": "Estimated rows of the running snapshot.",
}


class InstanceCollector(Collector):
    def __init__(self, instance: EngineInstance) -> None:
        self.instance = instance

    def collect(self) -> Iterator[Metric]:
        status = self.instance.status()
        name = status["name"]
        state = GaugeMetricFamily(
            "airflow_cdc_engine_state", "1 for the engine's current state.", labels=["name", "state"]
        )
        for candidate in STATES:
            state.add_metric([name, candidate], 1.0 if status["state"] == candidate else 0.0)
        yield state
        tasks: list[dict[str, Any]] = status["tasks"]
        for key, metric, doc in TASK_COUNTERS:
            counter = CounterMetricFamily(metric, doc, labels=["name", "task"])
            for task in tasks:
                counter.add_metric([name, str(task["id"])], float(task.get(key) or 0))
            yield counter
        for key, metric, doc in TASK_GAUGES:
            gauge = GaugeMetricFamily(metric, doc, labels=["name", "task"])
            for task in tasks:
                if task.get(key) is not None:
                    gauge.add_metric([name, str(task["id"])], float(task[key]))
            yield gauge
        for key, doc in SOURCE_GAUGES.items():
            gauge = GaugeMetricFamily(f"airflow_cdc_source_{key}", doc, labels=["name", "task"])
            for task in tasks:
                value = (task.get("source") or {}).get(key)
                if value is not None:
                    gauge.add_metric([name, str(task["id"])], float(value))
            yield gauge
        sink = status["sink"]
        delivered = CounterMetricFamily(
            "airflow_cdc_sink_delivered", "Records the sink made durable.", labels=["name", "sink"]
        )
        delivered.add_metric([name, sink["type"]], float(sink.get("delivered", 0)))
        yield delivered


def render_metrics(instance: EngineInstance) -> tuple[bytes, str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(InstanceCollector(instance))
    return generate_latest(registry), CONTENT_TYPE_LATEST
