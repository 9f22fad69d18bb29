"""Debezium's semantic types and Kafka Connect's logical types that both dialects decode: the
temporal units and the clock, Connect's Decimal and Debezium's VariableScaleDecimal, bytes in
each ``binary.handling.mode``, ``io.debezium.data.Bits``, and a Struct's JSON object."""

from __future__ import annotations

import binascii
import datetime as dt
import json
from typing import Any

from airflow_cdc.spark.values.columns import ColumnType, Convert, Modes

# ---------------------------------------------------------------------------------------------
# Time: io.debezium.time.* and Connect's Date/Time/Timestamp

EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
FIRST_ISO_DAY = dt.date.min.toordinal() - EPOCH_ORDINAL  # 0001-01-01
LAST_ISO_DAY = dt.date.max.toordinal() - EPOCH_ORDINAL  # 9999-12-31


def clock(micros: int) -> str:
    """'HH:MM:SS[.ffffff]' of microseconds since midnight (hours may pass 23)."""
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if fraction:
        return f"{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"
    return f"{hour:02d}:{minute:02d}:{second:02d}"


def uses_micros(column: ColumnType, modes: Modes, is_time: bool) -> bool:
    """As the engine picks the unit: precision above 3, or any ``time`` under
    adaptive_time_microseconds; milliseconds everywhere under connect."""
    if modes.time_precision == "connect":
        return False
    precision = 6 if column.precision is None else column.precision
    return precision > 3 or (is_time and modes.time_precision == "adaptive_time_microseconds")


# ---------------------------------------------------------------------------------------------
# Decimals: Connect's Decimal and Debezium's VariableScaleDecimal


def _scaled_text(unscaled: int, scale: int) -> str:
    """-12345, 3 -> '-12.345'."""
    if scale <= 0:
        return str(unscaled * 10**-scale)
    whole, fraction = divmod(-unscaled if unscaled < 0 else unscaled, 10**scale)
    return f"{'-' if unscaled < 0 else ''}{whole}.{fraction:0{scale}d}"


def _unscaled(encoded: str, scale: int) -> str:
    """Connect's Decimal: base64 of the unscaled value's big-endian two's-complement bytes."""
    return _scaled_text(int.from_bytes(binascii.a2b_base64(encoded, strict_mode=True), "big", signed=True), scale)


def _variable_scale(text: str) -> str:
    """VariableScaleDecimal: {"scale": 3, "value": "<base64>"}."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a {scale, value} object")
    return _unscaled(value["value"], int(value["scale"]))


def precise(scale: int | None) -> Convert:
    """``decimal.handling.mode=precise``: a Decimal of the column's scale, or a
    VariableScaleDecimal, as the number's text."""

    def convert(text: str) -> str:
        if text[:1] == "{":
            return _variable_scale(text)
        if scale is None:
            raise ValueError(
                "a fixed-scale Decimal for a numeric column without a scale: declare the target column with the "
                "source's numeric(p,s)"
            )
        return _unscaled(text, scale)

    return convert


# ---------------------------------------------------------------------------------------------
# Bytes, in each binary.handling.mode, and io.debezium.data.Bits


_URL_SAFE = str.maketrans("-_", "+/")


def base64(text: str) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)


def _base64_url_safe(text: str) -> bytes:
    return binascii.a2b_base64(text.translate(_URL_SAFE), strict_mode=True)


#: binary.handling.mode -> the decoder of a bytes value.
BINARY: dict[str, Convert] = {
    "bytes": base64,  # JSON has no bytes: base64
    "base64": base64,
    "base64-url-safe": _base64_url_safe,
    "hex": bytes.fromhex,
}


def bits_value(text: str) -> int:
    """io.debezium.data.Bits: BitSet.toByteArray(), little-endian, always base64."""
    return int.from_bytes(base64(text), "little")


# ---------------------------------------------------------------------------------------------
# Structs


def json_object(text: str) -> dict[str, Any]:
    """A Struct's (or a map's) JSON text as a dict."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
