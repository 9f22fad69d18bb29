"""Topic renaming: Kafka Connect's ``RegexRouter``."""

from __future__ import annotations

import re

from airflow_cdc.engine.config import Config, ConfigDef, Field
from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.transforms.base import ConfigurableTransform

_JAVA_GROUP = re.compile(r"\$(\d+)")


def java_replacement(replacement: str) -> str:
    """Java's ``$1`` group references, as Python's ``\\g<1>``."""
    return _JAVA_GROUP.sub(r"\\g<\1>", replacement)


class RegexRouter(ConfigurableTransform):
    """Renames a record's topic when the whole topic matches ``regex``; ``$1`` refers to groups."""

    config_def = ConfigDef(
        [
            Field("regex", doc="Regular expression the whole topic name must match."),
            Field("replacement", doc="Replacement topic name; $1, $2 refer to regex groups."),
        ]
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        try:
            self._regex = re.compile(self.settings["regex"])
        except re.error as exc:
            from airflow_cdc.engine.errors import TransformError

            raise TransformError(f"regex {self.settings['regex']!r} does not compile: {exc}") from exc
        self._replacement = java_replacement(self.settings["replacement"])
        # Topics repeat endlessly; the rename of each is computed once.
        self._renamed: dict[str, str] = {}

    def rename(self, topic: str) -> str:
        renamed = self._renamed.get(topic)
        if renamed is None:
            match = self._regex.fullmatch(topic)
            renamed = match.expand(self._replacement) if match else topic
            self._renamed[topic] = renamed
        return renamed

    def apply(self, record: SourceRecord) -> SourceRecord:
        topic = self.rename(record.topic)
        return record if topic == record.topic else record.replace(topic=topic)
