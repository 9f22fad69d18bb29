"""What a transform is, and how a chain of them runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from airflow_cdc.engine.config import Config, ConfigDef
from airflow_cdc.engine.records import SourceRecord


@runtime_checkable
class Transform(Protocol):
    """A single message transform: returns the new record, or None to drop it.

    Records are immutable (checked by mypy, not at run time, see ADR 0008): return
    ``record.replace(...)``, never assign to a field."""

    def apply(self, record: SourceRecord) -> SourceRecord | None: ...


class ConfigurableTransform:
    """Base of the transforms named in a configuration (``transforms.<alias>.type``)."""

    config_def: ClassVar[ConfigDef] = ConfigDef()

    def __init__(self, config: Config) -> None:
        self.settings = self.config_def.validate(config)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        raise NotImplementedError


class Predicate(Protocol):
    def test(self, record: SourceRecord) -> bool: ...


class Conditional:
    """Kafka Connect's conditional transform: apply only where the predicate (maybe negated) holds."""

    def __init__(self, transform: Transform, predicate: Predicate, negate: bool) -> None:
        self._transform = transform
        self._predicate = predicate
        self._negate = negate

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        if self._predicate.test(record) != self._negate:
            return self._transform.apply(record)
        return record


class FunctionTransform:
    """A plain Python callable used as a transform."""

    def __init__(self, function: Callable[[SourceRecord], SourceRecord | None]) -> None:
        self._function = function

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return self._function(record)


class TransformChain:
    """Applies transforms in order; a None from any of them drops the record."""

    def __init__(self, transforms: Sequence[Transform] = ()) -> None:
        self.transforms = tuple(transforms)

    def __bool__(self) -> bool:
        return bool(self.transforms)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        current = record
        for transform in self.transforms:
            result = transform.apply(current)
            if result is None:
                return None
            current = result
        return current
