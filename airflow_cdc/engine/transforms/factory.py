"""Builds the transform chain from Kafka Connect-style configuration.

``transforms=route,unwrap`` with ``transforms.route.type=<class>`` and the transform's own keys
under ``transforms.route.``; ``predicates=...`` likewise. The Java class names of Kafka Connect
and Debezium are accepted, so a Debezium configuration moves here unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from airflow_cdc.engine.config import Config, Field
from airflow_cdc.engine.errors import ConfigError, ConfigProblem, TransformError
from airflow_cdc.engine.transforms.base import Conditional, Predicate, Transform, TransformChain
from airflow_cdc.engine.transforms.filter import (
    ConfigurablePredicate,
    Filter,
    HasHeaderKey,
    RecordIsTombstone,
    TopicNameMatches,
)
from airflow_cdc.engine.transforms.route import RegexRouter
from airflow_cdc.engine.transforms.unwrap import ExtractNewRecordState

TRANSFORM_TYPES: dict[str, Callable[[Config], Transform]] = {
    "org.apache.kafka.connect.transforms.RegexRouter": RegexRouter,
    "org.apache.kafka.connect.transforms.Filter": Filter,
    "io.debezium.transforms.ExtractNewRecordState": ExtractNewRecordState,
}

PREDICATE_TYPES: dict[str, type[ConfigurablePredicate]] = {
    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches": TopicNameMatches,
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone": RecordIsTombstone,
    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey": HasHeaderKey,
}

_LIST = Field("transforms", type="list", default=[])


def _short(types: Mapping[str, object]) -> dict[str, str]:
    """Accept ``RegexRouter`` as well as the full class name."""
    return {name.rsplit(".", 1)[-1]: name for name in types}


def _build_one(
    kind: str,
    alias: str,
    config: Config,
    types: Mapping[str, Callable[[Config], object]],
    problems: list[ConfigProblem],
) -> object | None:
    prefix = f"{kind}.{alias}."
    own = config.subset(prefix)
    type_name = own.get("type")
    if not type_name:
        problems.append(ConfigProblem(prefix + "type", "is required", f"name the {kind[:-1]} class"))
        return None
    type_name = _short(types).get(str(type_name), str(type_name))
    factory = types.get(type_name)
    if factory is None:
        problems.append(
            ConfigProblem(prefix + "type", f"unknown type {type_name!r}", f"use one of: {', '.join(sorted(types))}")
        )
        return None
    try:
        return factory(own)
    except ConfigError as exc:
        problems.extend(ConfigProblem(prefix + p.key, p.message, p.fix) for p in exc.problems)
    except TransformError as exc:
        problems.append(ConfigProblem(prefix + "type", str(exc), "correct the transform's settings"))
    return None


def build_transform_chain(config: Mapping[str, object]) -> TransformChain:
    """The chain named by ``transforms``; raises ConfigError listing every problem."""
    cfg = config if isinstance(config, Config) else Config(config)
    problems: list[ConfigProblem] = []
    predicates: dict[str, Predicate] = {}
    for alias in _LIST.parse(cfg.get("predicates", [])):
        built = _build_one("predicates", alias, cfg, PREDICATE_TYPES, problems)
        if built is not None:
            predicates[alias] = built  # type: ignore[assignment]
    chain: list[Transform] = []
    for alias in _LIST.parse(cfg.get("transforms", [])):
        built = _build_one("transforms", alias, cfg, TRANSFORM_TYPES, problems)
        if built is None:
            continue
        transform: Transform = built  # type: ignore[assignment]
        predicate_name = cfg.get(f"transforms.{alias}.predicate")
        if predicate_name:
            predicate = predicates.get(str(predicate_name))
            if predicate is None:
                problems.append(
                    ConfigProblem(
                        f"transforms.{alias}.predicate",
                        f"names predicate {predicate_name!r}, which is not defined",
                        f"add {predicate_name!r} to 'predicates' and set predicates.{predicate_name}.type",
                    )
                )
                continue
            negate = Field("negate", type="bool", default=False).parse(cfg.get(f"transforms.{alias}.negate", False))
            transform = Conditional(transform, predicate, negate)
        chain.append(transform)
    if problems:
        raise ConfigError(problems)
    return TransformChain(chain)
