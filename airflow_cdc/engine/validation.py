"""A whole configuration validated at once, apart from any engine: engine, offset store,
connector, transforms, and whatever else reads the same flat properties (the sink, the
instance), each contributing the keys it declares.

:func:`validate_config` returns a :class:`ValidatedConfig` - every part's parsed settings, the
connector instance, the transform chain, and warnings - or raises one :class:`ConfigError`
listing every problem, each once (a key several parts declare, such as ``max.batch.size``, is
reported once). A key that no part declares is a warning naming the nearest known key; with
``config.strict=true`` (or ``strict=True``) it is an error. ``Engine`` takes a ValidatedConfig
as it is, so an instance validates its configuration once and reports each warning once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.config import Config, ConfigDef, unknown_keys
from airflow_cdc.engine.connector import SourceConnector, load_connector_class
from airflow_cdc.engine.engine_config import CONNECT_FRAMEWORK_KEYS, ENGINE_CONFIG
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.storage import KEY_ALIASES, offset_store_problems, resolve_key_aliases
from airflow_cdc.engine.transforms import TransformChain, build_transform_chain

#: ``transforms=a,b`` and ``predicates=p`` with each one's keys under ``transforms.a.``, ...
TRANSFORM_KEYS = ConfigDef(prefixes=("transforms.", "predicates."), ignored=("transforms", "predicates"))
#: The other spellings the offset store accepts (Debezium 3's JDBC key names).
OFFSET_KEY_ALIASES = ConfigDef(ignored=KEY_ALIASES)

Check = Callable[[Mapping[str, Any]], tuple[dict[str, Any], list[ConfigProblem]]]


@dataclass(frozen=True)
class Component:
    """A part of the configuration read beside the engine's (a sink, the instance's control
    API): the keys it declares, and the check that parses its values."""

    name: str
    declared: ConfigDef
    check: Check


def config_component(name: str, config_def: ConfigDef) -> Component:
    """A component whose settings are exactly ``config_def``'s fields."""
    return Component(name, config_def, config_def.check)


def sink_component() -> Component:
    """``sink.type`` and the chosen sink's settings; every sink's keys are declared, and
    ``sink.kafka.producer.*`` (handed to the producer) passes through."""
    from airflow_cdc.engine.sinks import SINK_CONFIG, SINKS
    from airflow_cdc.engine.sinks.kafka_python import PRODUCER_PREFIX

    declared = SINK_CONFIG.merged(*(sink.config for sink in SINKS.values()), ConfigDef(prefixes=[PRODUCER_PREFIX]))

    def check(props: Mapping[str, Any]) -> tuple[dict[str, Any], list[ConfigProblem]]:
        kind, problems = SINK_CONFIG.check(props)
        if problems:
            return kind, problems
        values, problems = SINKS[kind["sink.type"]].config.check(props)
        return {**kind, **values}, problems

    return Component("sink", declared, check)


@dataclass(frozen=True)
class ValidatedConfig:
    """A configuration that passed validation, and what validating it produced."""

    #: The properties as given (``connector.class`` filled in for a connector passed as an object).
    config: Config
    #: The engine's settings and the offset store's, parsed (``Engine.settings``).
    engine: Mapping[str, Any]
    #: A new, unstarted instance of the connector ``connector.class`` names.
    connector: SourceConnector
    #: The connector's own settings, parsed.
    connector_settings: Mapping[str, Any]
    transforms: TransformChain
    #: Each extra component's parsed settings, by component name (``"sink"``, ...).
    components: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Keys no component declares (errors instead with config.strict=true).
    warnings: tuple[ConfigProblem, ...] = ()

    @property
    def name(self) -> str:
        return str(self.engine["name"])


def validate_config(
    props: Mapping[str, object],
    *,
    connector: SourceConnector | None = None,
    offset_store_given: bool = False,
    components: Sequence[Component] = (),
    strict: bool | None = None,
) -> ValidatedConfig:
    """Validate everything ``props`` configures; raise ConfigError listing every problem once.

    ``connector``: an instance to use instead of loading ``connector.class``.
    ``offset_store_given``: the caller brings its own offset store; ``offset.storage*`` is not checked.
    ``strict``: unknown keys are errors; None reads ``config.strict``.
    """
    config = props if isinstance(props, Config) else Config(props)
    if connector is not None and "connector.class" not in config:
        config = config.with_(**{"connector.class": f"{type(connector).__module__}:{type(connector).__qualname__}"})
    resolved, problems = resolve_key_aliases(config)
    engine, more = ENGINE_CONFIG.check(resolved)
    problems += more
    connector = connector or _load_connector(engine.get("connector.class"), problems)
    connector_settings: dict[str, Any] = {}
    if connector is not None:
        connector_settings = connector.config_def.check(config)[0]
        problems += connector.validate(config)
    if not offset_store_given:
        problems += offset_store_problems(engine)
    transforms = TransformChain()
    try:
        transforms = build_transform_chain(config)
    except ConfigError as exc:
        problems += exc.problems
    parsed: dict[str, Mapping[str, Any]] = {}
    for component in components:
        parsed[component.name], more = component.check(resolved)
        problems += more

    warnings: list[ConfigProblem] = []
    if connector is not None:  # without it, its keys are unknown: no guessing which are misspelt
        declared = [ENGINE_CONFIG, CONNECT_FRAMEWORK_KEYS, TRANSFORM_KEYS, OFFSET_KEY_ALIASES, connector.config_def]
        warnings = unknown_keys(config, [*declared, *(c.declared for c in components)])
    if warnings and (strict if strict is not None else engine.get("config.strict", False)):
        refused = ": refused (config.strict)"
        problems += [ConfigProblem(w.key, w.message.replace(": ignored", refused), w.fix) for w in warnings]
        warnings = []
    problems, warnings = _once(problems), _once(warnings)
    if problems:
        raise ConfigError(problems, warnings=warnings)
    assert connector is not None  # else a problem was reported
    return ValidatedConfig(config, engine, connector, connector_settings, transforms, parsed, tuple(warnings))


def _load_connector(name: object, problems: list[ConfigProblem]) -> SourceConnector | None:
    if not name:
        return None  # connector.class is missing: ENGINE_CONFIG reported it
    try:
        return load_connector_class(str(name))()
    except ValueError as exc:
        problems.append(ConfigProblem("connector.class", str(exc), "name an installed connector"))
        return None


def _once(problems: Sequence[ConfigProblem]) -> list[ConfigProblem]:
    """Each problem once: several parts may declare the same key (``max.batch.size``)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for problem in problems:
        if (problem.key, problem.message) not in seen:
            seen.add((problem.key, problem.message))
            out.append(problem)
    return out
