"""Where the apply job writes: a SQL table (PostgreSQL, MySQL), a Delta, Parquet or Iceberg table.

``target_for(url, ...)`` picks one by the URL's scheme. A target's ``apply(latest)`` takes the
laned latest frame of one micro-batch (``frames.py``) and returns counts; it must be replay-safe
(the position guard) because a batch replayed after a crash is applied again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

SQL_SCHEMES = ("postgresql", "postgres", "mysql")
LAKE_SCHEMES = ("delta", "parquet", "iceberg")


class Target(Protocol):
    def apply(self, latest: Any) -> dict[str, int]: ...


def scheme_of(url: str) -> str:
    return url.split(":", 1)[0].lower() if ":" in url else ""


def target_for(url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> Target:
    scheme = scheme_of(url)
    if scheme in SQL_SCHEMES:
        from airflow_cdc.spark.targets.sql_target import SqlTarget

        return SqlTarget(url, dict(table_map), dict(settings))
    if scheme in LAKE_SCHEMES:
        from airflow_cdc.spark.targets.lake import LakeTarget

        return LakeTarget(url, dict(table_map), dict(settings))
    raise ConfigError(
        [
            ConfigProblem(
                "--target-url",
                f"unknown target {url.split('@')[-1]!r}",
                "postgresql://…, mysql://…, delta:PATH, parquet:PATH, iceberg:PATH or iceberg:catalog=NAME",
            )
        ]
    )
