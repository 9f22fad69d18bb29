"""An engine configuration as a Debezium connector's configuration on Kafka Connect.

The engine's keys are Debezium's by design (ADR 0011), so a configuration file moves to Connect
almost unchanged. What does not move is what only the embedded instance reads: its name (Connect
takes it beside the config), its state directory and control API, its sink and offset store
(Connect has its own topics and converters), and the engine's own tuning keys. Those are left
out, and the two lists whose values differ are translated: the ``api`` notification channel
becomes Debezium's ``sink`` channel (a topic the backend reads notifications from), and the
``api`` signal channel is dropped (Debezium has no HTTP channel; the signal table and the Kafka
channel stay). Short ``connector.class`` names become Debezium's Java classes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.connector import CONNECTOR_CLASSES, KINDS
from airflow_cdc.engine.engine_config import ENGINE_CONFIG
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.server.config_file import flatten, strip_prefixes
from airflow_cdc.engine.server.instance_files import INSTANCE_CONFIG

log = logging.getLogger(__name__)

#: Engine fields that are Debezium connector properties too: they go to Connect as they are.
DEBEZIUM_KEYS = frozenset(
    {
        "connector.class",
        "tasks.max",
        "errors.max.retries",
        "errors.retry.delay.initial.ms",
        "errors.retry.delay.max.ms",
        "max.batch.size",
        "max.queue.size",
        "poll.interval.ms",
        "notification.enabled.channels",
        "notification.sink.topic.name",
    }
)
#: Every other engine or instance field is the embedded instance's alone (its name, state.dir,
#: api.*, the offset store, offset.flush.interval.ms - a worker setting on Connect -, the record
#: pool, ...); derived from the declarations, so a field added later is left out by default.
EMBEDDED_KEYS = frozenset(f.name for f in ENGINE_CONFIG.merged(INSTANCE_CONFIG)) - DEBEZIUM_KEYS
EMBEDDED_PREFIXES = ("api.", "sink.", "offset.storage.")

#: Our connector classes (short names and Python paths) as Debezium's Java classes.
_JAVA_CLASS = {kind.connector: kind.debezium_class for kind in KINDS if kind.debezium_class}
DEBEZIUM_CLASSES: dict[str, str] = {
    **{name: _JAVA_CLASS[path] for name, path in CONNECTOR_CLASSES.items() if path in _JAVA_CLASS},
    **{path: java for path, java in _JAVA_CLASS.items()},
    **{path.replace(":", "."): java for path, java in _JAVA_CLASS.items()},
}


def debezium_class(name: str) -> str:
    """Debezium's class for a ``connector.class`` of ours; any other Java class as it is."""
    if name in DEBEZIUM_CLASSES:
        return DEBEZIUM_CLASSES[name]
    if name in CONNECTOR_CLASSES or name.startswith("airflow_cdc."):
        raise ConfigError(
            [
                ConfigProblem(
                    "connector.class",
                    f"{name!r} is a connector of the embedded engine only; Kafka Connect runs Debezium's",
                    "use a Debezium connector (postgres, mysql, mariadb or its io.debezium... class)",
                )
            ]
        )
    return name


def connector_config(props: Mapping[str, Any], *, notification_topic: str = "") -> dict[str, Any]:
    """The Connect configuration of an engine configuration (flat, nested YAML, or with
    Debezium Server's prefixes). ``notification_topic``: the topic Debezium's sink notification
    channel must write to (where the backend reads notifications); it replaces the ``api``
    channel. ConfigError if the configuration names no connector class or another topic."""
    flat = strip_prefixes(flatten(props))
    if not flat.get("connector.class"):
        raise ConfigError(
            [ConfigProblem("connector.class", "is not set", "set connector.class, e.g. postgres or mysql")]
        )
    dropped = sorted(k for k in flat if k in EMBEDDED_KEYS or k.startswith(EMBEDDED_PREFIXES))
    if dropped:
        log.info("left out of the Connect configuration (the embedded instance's own keys): %s", ", ".join(dropped))
    config = {k: v for k, v in flat.items() if k not in dropped}
    config["connector.class"] = debezium_class(str(flat["connector.class"]))
    config.update(_notification_channels(config, notification_topic))
    signals = _listed(config.get("signal.enabled.channels", "source,api"))
    if "api" in signals:
        log.info("signal channel api left out: Debezium has none; signals go through the signal table or Kafka")
        config["signal.enabled.channels"] = ",".join(c for c in signals if c != "api") or "source"
    return config


def _notification_channels(config: Mapping[str, Any], topic: str) -> dict[str, str]:
    if "notification.enabled.channels" not in config and not (topic or config.get("notification.sink.topic.name")):
        # The engine's default (log, api) needs a topic on Connect; none is known: the log only.
        log.info("no notification topic: the connector's notifications go to its log only")
        return {"notification.enabled.channels": "log"}
    channels = _listed(config.get("notification.enabled.channels", "log,api"))
    configured = str(config.get("notification.sink.topic.name") or "")
    if "api" in channels or "sink" in channels:
        channels = [c for c in channels if c != "api"]
        channels += [] if "sink" in channels else ["sink"]
        if topic and configured and configured != topic:
            raise ConfigError(
                [
                    ConfigProblem(
                        "notification.sink.topic.name",
                        f"is {configured!r}, but the notifications are read from {topic!r}",
                        "make the connection's notification topic and the configuration's the same",
                    )
                ]
            )
        if not (configured or topic):
            raise ConfigError(
                [
                    ConfigProblem(
                        "notification.sink.topic.name",
                        "is not set: Debezium publishes notifications on Connect only to a topic",
                        "set notification.sink.topic.name, or give the client its notification topic",
                    )
                ]
            )
        return {
            "notification.enabled.channels": ",".join(channels),
            "notification.sink.topic.name": configured or topic,
        }
    return {"notification.enabled.channels": ",".join(channels)}


def _listed(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else str(value or "").split(",")
    return [str(item).strip() for item in items if str(item).strip()]
