"""What Debezium emits for a NOT NULL column that has no value and no constant default: the
non-key columns of a key-only old tuple (DELETE, or UPDATE of the key, under REPLICA IDENTITY
DEFAULT). Its schema says the field is required, so ``JdbcValueConverters.convertValue`` puts
the type's *fallback* there: 0, false, "", the epoch, an empty array.

The fallbacks are values in Debezium's representation, chosen by type name and mode; the column's
own converter makes the rest (a constant default) in ``changes.plan_table``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_cdc.engine.sources.postgres import geometry
from airflow_cdc.engine.sources.postgres.numeric import numeric_scale
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes

_ZERO_DECIMAL = "AA=="  # Connect Decimal 0: BigInteger.ZERO.toByteArray() = [0], base64

_BY_NAME: dict[str, Any] = {
    **dict.fromkeys(("int2", "int4", "int8", "oid", "date", "time", "timestamp"), 0),
    **dict.fromkeys(("float4", "float8"), 0.0),
    "bool": False,
    "timetz": "00:00:00Z",
}


def _decimal(modes: ValueModes, scale: int | None) -> Any:
    """BigDecimal.ZERO at the column's scale: "0.00" as a string, a VariableScaleDecimal 0
    without a scale."""
    if modes.decimal == "double":
        return 0.0
    if modes.decimal == "string":
        return "0." + "0" * scale if scale else "0"
    return {"scale": 0, "value": _ZERO_DECIMAL} if scale is None else _ZERO_DECIMAL


def _money(modes: ValueModes) -> Any:
    if modes.decimal == "double":
        return 0.0
    if modes.decimal == "string":
        return "0." + "0" * modes.money_fraction_digits if modes.money_fraction_digits else "0"
    return _ZERO_DECIMAL


def _by_mode(info: TypeInfo, type_modifier: int, modes: ValueModes) -> tuple[bool, Any]:
    name = info.name
    if name == "numeric":
        return True, _decimal(modes, numeric_scale(type_modifier))
    if name == "money":
        return True, _money(modes)
    if name == "interval":
        return True, "P0Y0M0DT0H0M0S" if modes.interval == "string" else 0
    if name in ("bit", "varbit"):  # bit(1) and varbit(1) are booleans, wider ones Bits bytes
        return True, False if type_modifier == 1 else ""
    if name in geometry.FALLBACKS:
        return True, geometry.FALLBACKS[name]
    if name == "timestamptz":  # the epoch, its fraction as wide as the column's (as every value)
        digits = 6 if type_modifier < 0 else type_modifier
        return True, "1970-01-01T00:00:00" + ("." + "0" * digits if digits else "") + "Z"
    if name == "hstore":
        return True, "{}" if modes.hstore == "json" else {}
    return False, None


def fallback_value(oid: int, type_modifier: int, modes: ValueModes, lookup: Callable[[int], TypeInfo]) -> Any:
    """Debezium's value for a required column that has none: by type, domains by their base."""
    info = lookup(oid)
    if info.kind == "d" and info.base_oid:
        return fallback_value(info.base_oid, type_modifier, modes, lookup)
    if info.category == "A":
        return []
    if info.name in _BY_NAME:
        return _BY_NAME[info.name]
    known, value = _by_mode(info, type_modifier, modes)
    if known:
        return value
    # Strings (text, varchar, char, json, uuid, enums, inet, ranges, ...) and bytes (bytea and
    # varbit in every binary mode: an empty value) all fall back to "".
    return ""
