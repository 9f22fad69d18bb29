"""Kafka Connect's ``Filter`` and its predicates.

``Filter`` drops every record it is applied to, so it is always used with a predicate:
``transforms.f.predicate=isHeartbeat`` applies it only where ``predicates.isHeartbeat`` holds
(``transforms.f.negate=true`` inverts that).
"""

from __future__ import annotations

import re

from airflow_cdc.engine.config import Config, ConfigDef, Field
from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.transforms.base import ConfigurableTransform


class Filter(ConfigurableTransform):
    def apply(self, record: SourceRecord) -> None:
        return None


class ConfigurablePredicate:
    config_def = ConfigDef()

    def __init__(self, config: Config) -> None:
        self.settings = self.config_def.validate(config)

    def test(self, record: SourceRecord) -> bool:
        raise NotImplementedError


class TopicNameMatches(ConfigurablePredicate):
    config_def = ConfigDef([Field("pattern", doc="Regular expression the whole topic name must match.")])

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._pattern = re.compile(self.settings["pattern"])

    def test(self, record: SourceRecord) -> bool:
        return self._pattern.fullmatch(record.topic) is not None


class RecordIsTombstone(ConfigurablePredicate):
    def test(self, record: SourceRecord) -> bool:
        return record.value is None


class HasHeaderKey(ConfigurablePredicate):
    config_def = ConfigDef([Field("name", doc="Header name to look for.")])

    def test(self, record: SourceRecord) -> bool:
        name = self.settings["name"]
        return any(key == name for key, _ in record.headers)
