"""An LSN is two 32-bit halves: a half written wider is refused naming the form (``0/100000000``
was read as ``1/0``, a position 4 GiB of WAL further on)."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.sources.postgres.positions import POSTGRES_POSITIONS, lsn_offset


@pytest.mark.parametrize(
    ("text", "wider"),
    [("0/100000000", "low"), ("100000000/0", "high"), ("123456789/123456789", "high and low")],
)
def test_a_half_wider_than_32_bits_is_refused_naming_the_form(text: str, wider: str) -> None:
    with pytest.raises(OffsetError) as refused:
        POSTGRES_POSITIONS.parse(text)
    message = str(refused.value)
    assert message.startswith(f"{text!r} is not an LSN like 0/16B3748: the form is X/Y, the high and the low 32 bits")
    assert message.endswith(f"each at most FFFFFFFF; its {wider} half is longer")


@pytest.mark.parametrize("text", ["0x1/0", "1/2_0", "1/ 2", "+1/0", "1/-0", "\uff11/0"])
def test_what_int_would_also_take_is_no_lsn(text: str) -> None:
    with pytest.raises(OffsetError, match="the form is X/Y"):
        POSTGRES_POSITIONS.parse(text)


def test_the_widest_lsn_and_leading_zeros_still_parse() -> None:
    assert POSTGRES_POSITIONS.parse("FFFFFFFF/FFFFFFFF") == lsn_offset((1 << 64) - 1)
    assert POSTGRES_POSITIONS.parse("00000001/000000010") == lsn_offset((1 << 32) | 0x10)
    assert POSTGRES_POSITIONS.parse("18446744073709551615") == lsn_offset((1 << 64) - 1)
    with pytest.raises(OffsetError, match="at most 2"):
        POSTGRES_POSITIONS.parse("18446744073709551616")
