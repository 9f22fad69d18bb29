"""The scenarios - a source, a pool of faults the seed draws from, how many, the sink - and which
of them the quick run (inside ``bash scripts/test``) takes. ``CDC_CHAOS=full`` (``scripts/chaos``)
takes them all; ``CDC_CHAOS_SEED`` and ``CDC_CHAOS_RUNS`` choose the seed and the runs of each.

``defect`` names a known engine defect a scenario hits: it runs in full and is expected to fail
(a strict xfail, so it fails loudly once the defect is fixed)."""

from __future__ import annotations

import os

from tests.chaos.faults import (
    ChangelogDiskFull,
    ChangelogDiskFullNoRoom,
    ConnectWorkerKill,
    ConsumerFarBehind,
    EngineKill,
    KafkaBrokerKill,
    MariaDbHardRestart,
    MariaDbKillBinlog,
    OffsetsUnavailable,
    PgRestartImmediate,
    PgTerminateReaders,
    PgTerminateWalsender,
    SparkDriverKill,
)
from tests.chaos.harness import Scenario

# "defect N: what" - the README's table shows "defect N" (1-4, the engine's, and 5, the Spark
# apply job's NOT NULL TOAST upsert, are fixed).

SCENARIOS = (
    Scenario("pg-engine-kill", "postgres", (EngineKill,), faults=3, quick=True),
    Scenario("pg-engine-kill-incremental", "postgres", (EngineKill,), faults=2, incremental=True),
    Scenario("pg-consumer-far-behind", "postgres", (ConsumerFarBehind,), faults=2),
    Scenario("pg-offsets-unavailable", "postgres", (OffsetsUnavailable,), faults=2, quick=True),
    Scenario("pg-kafka-broker-kill", "postgres", (KafkaBrokerKill,), faults=2, sink="kafka"),
    Scenario("pg-spark-driver-kill", "postgres", (SparkDriverKill,), faults=2, apply="nullable"),
    Scenario("pg-spark-not-null-toast", "postgres", (SparkDriverKill,), faults=1, apply="same"),
    Scenario("pg-connect-worker-kill", "postgres", (ConnectWorkerKill,), faults=2, sink="kafka", pipeline="connect"),
    Scenario("pg-mixed", "postgres", (EngineKill, ConsumerFarBehind, OffsetsUnavailable), faults=5, incremental=True),
    Scenario("pg-restart-immediate", "postgres", (PgRestartImmediate,), faults=2),
    Scenario("pg-terminate-walsender", "postgres", (PgTerminateWalsender,), faults=2),
    Scenario("pg-terminate-readers", "postgres", (PgTerminateReaders,), faults=2, incremental=True),
    Scenario("pg-changelog-disk-full", "postgres", (ChangelogDiskFull,), faults=2),
    Scenario("pg-changelog-disk-full-no-room", "postgres", (ChangelogDiskFullNoRoom,), faults=2),
    Scenario("mariadb-engine-kill", "mariadb", (EngineKill,), faults=3),
    Scenario("mariadb-hard-restart", "mariadb", (MariaDbHardRestart,), faults=2, quick=True),
    Scenario("mariadb-kill-binlog", "mariadb", (MariaDbKillBinlog,), faults=3, quick=True),
    Scenario("mariadb-consumer-far-behind", "mariadb", (ConsumerFarBehind,), faults=2),
    Scenario("mariadb-offsets-unavailable", "mariadb", (OffsetsUnavailable,), faults=2),
    Scenario(
        "mariadb-mixed",
        "mariadb",
        (EngineKill, MariaDbHardRestart, MariaDbKillBinlog, ConsumerFarBehind, OffsetsUnavailable),
        faults=5,
        incremental=True,
    ),
    Scenario("mariadb-changelog-disk-full", "mariadb", (ChangelogDiskFull,), faults=2),
    Scenario("mariadb-changelog-disk-full-no-room", "mariadb", (ChangelogDiskFullNoRoom,), faults=2),
)


def full() -> bool:
    return os.environ.get("CDC_CHAOS", "").strip().lower() == "full"


def selected() -> list[Scenario]:
    return [s for s in SCENARIOS if full() or s.quick]


def seed() -> int:
    """The issue's number unless told: the quick run in CI draws the same schedule every time."""
    return int(os.environ.get("CDC_CHAOS_SEED") or 26)


def runs() -> int:
    return int(os.environ.get("CDC_CHAOS_RUNS") or 1)
