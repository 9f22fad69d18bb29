"""Debezium's MySQL/MariaDB value-handling options (``decimal.handling.mode`` and its
siblings), read from a connector's configuration: which JSON a converter (``types.py``) gives a
value of each kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DECIMAL_MODES = ("precise", "double", "string")
TIME_PRECISION_MODES = ("adaptive_time_microseconds", "connect")
BIGINT_UNSIGNED_MODES = ("long", "precise")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")


@dataclass(frozen=True)
class ValueModes:
    """Debezium's MySQL connector options, with its defaults. ValueError for a value this
    module does not implement (Debezium refuses ``adaptive``; its newer ``microseconds``,
    ``nanoseconds`` and ``isostring`` precision modes are not implemented here)."""

    decimal: str = "precise"  # decimal.handling.mode
    time_precision: str = "adaptive_time_microseconds"  # time.precision.mode
    bigint_unsigned: str = "long"  # bigint.unsigned.handling.mode
    binary: str = "bytes"  # binary.handling.mode

    def __post_init__(self) -> None:
        for value, allowed, key in (
            (self.decimal, DECIMAL_MODES, "decimal.handling.mode"),
            (self.time_precision, TIME_PRECISION_MODES, "time.precision.mode"),
            (self.bigint_unsigned, BIGINT_UNSIGNED_MODES, "bigint.unsigned.handling.mode"),
            (self.binary, BINARY_MODES, "binary.handling.mode"),
        ):
            if value not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> ValueModes:
        """From Debezium's keys (case-insensitive values); an absent key takes the default."""
        default = cls()

        def mode(key: str, fallback: str) -> str:
            value = settings.get(key)
            return fallback if value is None else str(value).strip().lower()

        return cls(
            decimal=mode("decimal.handling.mode", default.decimal),
            time_precision=mode("time.precision.mode", default.time_precision),
            bigint_unsigned=mode("bigint.unsigned.handling.mode", default.bigint_unsigned),
            binary=mode("binary.handling.mode", default.binary),
        )
