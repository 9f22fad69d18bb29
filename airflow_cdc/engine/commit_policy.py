"""When to commit offsets: Debezium's ``offset.commit.policy``."""

from __future__ import annotations

from typing import Protocol


class OffsetCommitPolicy(Protocol):
    def perform_commit(self, records_since_last_commit: int, seconds_since_last_commit: float) -> bool: ...


class PeriodicCommitPolicy:
    """Commit when ``offset.flush.interval.ms`` has passed since the last commit (the default)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s

    def perform_commit(self, records_since_last_commit: int, seconds_since_last_commit: float) -> bool:
        return records_since_last_commit > 0 and seconds_since_last_commit >= self.interval_s


class AlwaysCommitPolicy:
    """Commit after every processed batch."""

    def perform_commit(self, records_since_last_commit: int, seconds_since_last_commit: float) -> bool:
        return records_since_last_commit > 0


COMMIT_POLICY_ALIASES = {
    "io.debezium.engine.spi.OffsetCommitPolicy.PeriodicCommitOffsetPolicy": "periodic",
    "io.debezium.engine.spi.OffsetCommitPolicy$PeriodicCommitOffsetPolicy": "periodic",
    "io.debezium.engine.spi.OffsetCommitPolicy.AlwaysCommitOffsetPolicy": "always",
    "io.debezium.engine.spi.OffsetCommitPolicy$AlwaysCommitOffsetPolicy": "always",
}


def make_commit_policy(name: str, interval_ms: int) -> OffsetCommitPolicy:
    if name == "always":
        return AlwaysCommitPolicy()
    return PeriodicCommitPolicy(interval_ms / 1000.0)
