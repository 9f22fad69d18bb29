"""What a decoder is built from and answers with: the target column's type (:class:`ColumnType`),
the connector's value-handling settings (:class:`Modes`), the error for a value it cannot read
(:class:`DecodeError`), and the JSON-text form values arrive in (:func:`json_text`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.errors import CdcError

Decoder = Callable[[str | None], Any]
#: One column's per-value work, on a value's JSON text (never None: the decoder handles null).
Convert = Callable[[str], Any]
#: A column's converter, and the :class:`Modes` attribute it depends on (None: it depends on none).
Built = tuple[Convert, str | None]

DECIMAL_MODES = ("precise", "double", "string")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
TIME_PRECISION_MODES = ("adaptive", "adaptive_time_microseconds", "connect")
INTERVAL_MODES = ("numeric", "string")
HSTORE_MODES = ("json", "map")

#: Modes attribute -> the connector setting it mirrors (for messages).
SETTINGS = {
    "decimal": "decimal.handling.mode",
    "binary": "binary.handling.mode",
    "time_precision": "time.precision.mode",
    "interval": "interval.handling.mode",
    "hstore": "hstore.handling.mode",
    "money_fraction_digits": "money.fraction.digits",
    "include_unknown": "include.unknown.datatypes",
}


@dataclass(frozen=True)
class Modes:
    """The connector's value-handling settings, Debezium's defaults (PostgreSQL's: note that
    Debezium's MySQL connector defaults ``time.precision.mode`` to adaptive_time_microseconds)."""

    decimal: str = "precise"
    binary: str = "bytes"
    time_precision: str = "adaptive"
    interval: str = "numeric"
    hstore: str = "json"
    money_fraction_digits: int = 2
    include_unknown: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> Modes:
        """From an engine or Debezium connector config (other keys are ignored)."""
        config = config or {}
        return cls(
            decimal=_choice(config, "decimal", DECIMAL_MODES, cls.decimal),
            binary=_choice(config, "binary", BINARY_MODES, cls.binary),
            time_precision=_choice(config, "time_precision", TIME_PRECISION_MODES, cls.time_precision),
            interval=_choice(config, "interval", INTERVAL_MODES, cls.interval),
            hstore=_choice(config, "hstore", HSTORE_MODES, cls.hstore),
            money_fraction_digits=int(config.get(SETTINGS["money_fraction_digits"], cls.money_fraction_digits)),
            include_unknown=str(config.get(SETTINGS["include_unknown"], "false")).strip().lower() == "true",
        )


def _choice(config: Mapping[str, Any], attribute: str, allowed: tuple[str, ...], default: str) -> str:
    key = SETTINGS[attribute]
    value = str(config.get(key, default)).strip().lower()
    if value not in allowed:
        raise ValueError(f"{key}={config.get(key)!r} is not one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class ColumnType:
    """A target column's type, as the target's catalog describes it.

    ``type_name``: PostgreSQL's ``pg_type.typname`` of the column's type with domains resolved
    to their base type (an array's *element* type, ``is_array`` set; an enum's own name,
    ``is_enum`` set); MySQL's ``DATA_TYPE``. ``scale``: the numeric scale (None: a numeric
    without one). ``precision``: fractional-second digits of a temporal type (None: 6).
    ``length``: a bit string's length (None: unbounded), MySQL's display width (``tinyint(1)``).
    ``sql_type``: the declared type (``format_type``, ``COLUMN_TYPE``), for messages.
    ``interval_fields``: a PostgreSQL interval's field restriction (``YEAR TO MONTH``, ...).
    """

    table: str
    column: str
    type_name: str
    sql_type: str = ""
    scale: int | None = None
    precision: int | None = None
    length: int | None = None
    is_array: bool = False
    is_enum: bool = False
    dialect: str = "postgresql"
    interval_fields: str | None = None

    @classmethod
    def mysql(
        cls,
        table: str,
        column: str,
        data_type: str,
        column_type: str,
        numeric_scale: int | None = None,
        datetime_precision: int | None = None,
    ) -> ColumnType:
        """From ``information_schema.COLUMNS``."""
        width = re.search(r"\((\d+)\)", column_type)
        return cls(
            table,
            column,
            data_type.lower(),
            column_type,
            scale=numeric_scale,
            precision=datetime_precision,
            length=int(width.group(1)) if width else None,
            dialect="mysql",
        )

    @property
    def described(self) -> str:
        return self.sql_type or (self.type_name + ("[]" if self.is_array else ""))


class DecodeError(CdcError, ValueError):
    """A value its column's decoder cannot read; the message names the column, the value and
    what to check."""

    def __init__(self, column: ColumnType, value: str, reason: str, fix: str) -> None:
        self.table, self.column, self.value = column.table, column.column, value
        shown = value if len(value) <= 60 else value[:60] + "..."
        super().__init__(
            f"Cannot decode column {column.column} of {column.table} ({column.described}), value {shown!r}: "
            f"{reason}. {fix}"
        )


def json_text(value: Any) -> str | None:
    """A ``json.loads`` value in the latest frame's JSON-text form (for key columns, which come
    from the record key, and array elements): a string as itself, null as None, anything else
    as its compact JSON."""
    if value is None or isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pass_through(text: Any) -> Any:
    """The decoder of a column whose JSON text is already the driver's value."""
    return text
