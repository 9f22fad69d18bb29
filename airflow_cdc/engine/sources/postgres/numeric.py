"""``numeric``, ``money``, ``float4`` and ``float8`` text -> Debezium's values, per
``decimal.handling.mode``.

* precise: ``numeric(p, s)`` is a Connect Decimal of scale ``s`` (base64 of the unscaled value's
  ``BigInteger.toByteArray()``); a plain ``numeric`` is a VariableScaleDecimal {scale, value}
  with trailing zeros stripped (``BigDecimal.stripTrailingZeros``, negative scales raised to 0).
  NaN and the infinities have no Decimal: null.
* double: a JSON number; NaN and the infinities as the strings Jackson writes ("NaN",
  "Infinity", "-Infinity").
* string: ``BigDecimal.toPlainString()``, which is PostgreSQL's own text (it never uses an
  exponent); the special values as ``SpecialValueDecimal`` names them.
"""

from __future__ import annotations

import decimal as std_decimal
from binascii import b2a_base64
from collections.abc import Callable
from typing import Any

Converter = Callable[[str], Any]

#: SpecialValueDecimal.toString() of PostgreSQL's special numerics (decimal.handling.mode=string).
SPECIAL_STRINGS = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY", "-Infinity": "NEGATIVE_INFINITY"}


def unscaled_bytes(unscaled: int) -> bytes:
    """Kafka Connect's Decimal: Java's ``BigInteger.toByteArray()``, the fewest big-endian
    two's-complement bytes with room for the sign bit (-128 is b'\\x80', 128 is b'\\x00\\x80')."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def unscaled_base64(unscaled: int) -> str:
    return b2a_base64(unscaled_bytes(unscaled), newline=False).decode("ascii")


def is_special(text: str) -> bool:
    """NaN, Infinity, -Infinity: the only numeric/float texts not ending in a digit."""
    return not text[-1].isdigit()


def java_double(text: str) -> Any:
    """float4/float8 (and numeric in double mode): the special values stay text, as Jackson
    writes a non-finite double."""
    return text if is_special(text) else float(text)


def numeric_scale(type_modifier: int) -> int | None:
    """numeric(p, s)'s scale, or None for a plain ``numeric`` (variable scale)."""
    if type_modifier < 4:
        return None
    return (type_modifier - 4) & 0xFFFF


def variable_scale(text: str) -> Any:
    """Debezium's VariableScaleDecimal of a plain ``numeric``."""
    if is_special(text):
        return None
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return {"scale": len(fraction), "value": unscaled_base64(int(whole + fraction))}


def fixed_scale(scale: int) -> Converter:
    """numeric(p, s): PostgreSQL prints exactly ``s`` fraction digits, so the unscaled integer
    is the digits without the point."""

    def convert(text: str) -> Any:
        if is_special(text):
            return None
        whole, _, fraction = text.partition(".")
        if len(fraction) == scale:
            try:
                unscaled = int(whole + fraction)
            except ValueError:  # an exponent: not PostgreSQL's output
                pass
            else:
                length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1  # as unscaled_bytes, inlined
                return b2a_base64(unscaled.to_bytes(length, "big", signed=True), newline=False).decode("ascii")
        # Other text (money.fraction.digits other than the text's, a default expression's).
        return unscaled_base64(_rounded_unscaled(text, scale))

    return convert


def _rounded_unscaled(text: str, scale: int) -> int:
    """BigDecimal.setScale(scale, HALF_UP)'s unscaled value."""
    value = std_decimal.Decimal(text).scaleb(scale)
    return int(value.to_integral_value(rounding=std_decimal.ROUND_HALF_UP))


def plain_string(text: str) -> str:
    return SPECIAL_STRINGS.get(text, text)


def decimal(mode: str, scale: int | None) -> Converter:
    if mode == "double":
        return java_double
    if mode == "string":
        return plain_string
    return variable_scale if scale is None else fixed_scale(scale)


def money(mode: str, digits: int) -> Converter:
    """money under lc_monetary=C: '-$1,234.56' or '($1,234.56)'; a Decimal of the configured
    fraction digits (``money.fraction.digits``)."""
    inner = decimal(mode, digits)

    def convert(text: str) -> Any:
        negative = text.startswith("-") or text.startswith("(")
        cleaned = "".join(ch for ch in text if ch.isdigit() or ch == ".")
        return inner(("-" if negative else "") + cleaned)

    return convert


def has_special(values: list[Any]) -> bool:
    """Debezium emits a numeric[] holding NaN or an infinity as null, whatever the mode."""
    return any(has_special(v) if isinstance(v, list) else v is not None and is_special(v) for v in values)
