"""``bit(n)`` and ``varbit(n)`` text -> Debezium's value.

A one-bit column is a boolean. Any other is Debezium's ``io.debezium.data.Bits``: a Connect
BYTES value (so base64 in JSON, whatever ``binary.handling.mode`` says) holding
``java.util.BitSet.toByteArray()`` of the bits read as an unsigned integer - the fewest
little-endian bytes, none for zero (PostgresValueConverter.convertBits sizes the array by the
value, not by the column's length).
"""

from __future__ import annotations

from binascii import b2a_base64
from typing import Any


def is_one_bit(type_modifier: int) -> bool:
    """bit/varbit typmods are the length itself (``bit`` alone is ``bit(1)``); an unbounded
    varbit (-1) is Bits."""
    return type_modifier == 1


def one_bit(text: str) -> bool:
    return "1" in text


def bits(text: str) -> str:
    value = int(text, 2) if text else 0
    return b2a_base64(value.to_bytes((value.bit_length() + 7) // 8, "little"), newline=False).decode("ascii")


def converter(type_modifier: int) -> Any:
    return one_bit if is_one_bit(type_modifier) else bits
