""":func:`decoder_for`: one column's decoder, built once by the target's dialect, and the guard
that turns any failure to read a value into a :class:`DecodeError` naming what to check."""

from __future__ import annotations

import struct
from typing import Any

from airflow_cdc.spark.values.columns import SETTINGS, ColumnType, Convert, DecodeError, Decoder, Modes, pass_through
from airflow_cdc.spark.values.mysql import mysql_converter
from airflow_cdc.spark.values.postgres import postgres_converter


def decoder_for(column: ColumnType, modes: Modes) -> Decoder:
    """The function turning one JSON-text value of ``column`` (or None) into the driver's value.

    Build it once per column: the returned function does the per-value work only."""
    build = mysql_converter if column.dialect == "mysql" else postgres_converter
    convert, setting = build(column, modes)
    if convert is pass_through:
        return pass_through
    return _guarded(convert, column, modes, setting)


_TYPE_HINT = (
    "The target column's type must match the source column's (Debezium encodes a value by the source's type: "
    "numeric scale, temporal precision and bit length included)"
)


def _fix(modes: Modes, setting: str | None) -> str:
    if setting is None:
        return _TYPE_HINT
    return (
        f"Set {SETTINGS[setting]} the same as the connector's (here it is {getattr(modes, setting)!r}); "
        f"otherwise the target column's type must match the source column's"
    )


_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, struct.error)


def _guarded(convert: Convert, column: ColumnType, modes: Modes, setting: str | None) -> Decoder:
    def decode(text: str | None) -> Any:
        if text is None:
            return None
        try:
            return convert(text)
        except _DECODE_ERRORS as exc:
            reason = _reason(exc)
            raise DecodeError(column, str(text), reason, _fix(modes, setting)) from exc

    return decode


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ArithmeticError) and text.startswith("[<class"):  # decimal's InvalidOperation
        return "not a decimal number"
    return text or type(exc).__name__
