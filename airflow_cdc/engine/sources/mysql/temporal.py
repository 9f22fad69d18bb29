"""MySQL/MariaDB ``date``, ``time``, ``datetime`` and ``timestamp`` values -> Debezium's numbers
and strings, from the Python values mysql-replication and PyMySQL yield (``date``,
``timedelta``, naive ``datetime``; ``timestamp`` in UTC).

Debezium's representations (time.precision.mode):

* ``date``: days since the epoch (io.debezium.time.Date, or Connect's Date: the same number).
* ``time``: MicroTime, microseconds (may be negative or past 24h: MySQL's range is
  -838:59:59..838:59:59); in ``connect`` mode Connect's Time in milliseconds, and null outside
  00:00:00..24:00:00 (Debezium cannot convert such a value and leaves the field unset).
* ``datetime``: Timestamp (ms) for fsp 0-3, MicroTimestamp (µs) for fsp 4-6; ``connect``: ms.
* ``timestamp``: ZonedTimestamp, an ISO-8601 string in UTC (see :func:`zoned_timestamp`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

US_PER_SECOND = 1_000_000
_US = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_DAY_US = 86_400 * US_PER_SECOND


# The converters call datetime's methods unbound, so that a value of another type is a
# TypeError (what a caller catches), not an AttributeError.


def epoch_days(value: dt.date) -> int:
    return dt.date.toordinal(value) - _EPOCH_ORDINAL


def epoch_micros(value: dt.datetime) -> int:
    return (value - _EPOCH) // _US


def epoch_millis(value: dt.datetime) -> int:
    """Floor, as ``Instant.toEpochMilli`` (a datetime(6) in connect mode drops its microseconds)."""
    return (value - _EPOCH) // _US // 1000


def time_micros(value: dt.timedelta) -> int:
    return value // _US


def connect_time_millis(micros: int) -> int | None:
    """Connect's Time: milliseconds of a time of day; Debezium emits null for a time it cannot
    convert (negative, or past 24:00:00)."""
    if micros < 0 or micros > _DAY_US:
        return None
    return micros // 1000


def zoned_timestamp(fsp: int) -> Callable[[dt.datetime], str]:
    """ZonedTimestamp of a ``timestamp(fsp)`` value (a naive datetime in UTC) as Debezium's
    binlog reader formats it: ``2024-02-29T13:37:03.500000Z`` for fsp 6, always ``fsp``
    fraction digits; ``timestamp(0)`` as ``DateTimeFormatter.ISO_OFFSET_DATE_TIME`` does: no
    fraction."""
    if fsp <= 0:
        return lambda value: dt.datetime.isoformat(value)[:19] + "Z"
    width = 20 + fsp  # 'YYYY-MM-DDTHH:MM:SS.' and the digits
    zeros = "." + "0" * fsp + "Z"

    def convert(value: dt.datetime) -> str:
        text = dt.datetime.isoformat(value)  # no fraction when it is zero
        return text[:width] + "Z" if len(text) > 19 else text + zeros

    return convert


def iso_offset_timestamp(value: dt.datetime) -> str:
    """``DateTimeFormatter.ISO_OFFSET_DATE_TIME`` of a UTC datetime: the fraction with its
    trailing zeros stripped, none when zero (what Debezium's snapshot emits for a
    ``timestamp``: JDBC's java.sql.Timestamp takes that formatter whatever the precision)."""
    text = dt.datetime.isoformat(value)  # no fraction when it is zero
    return (text.rstrip("0") if len(text) > 19 else text) + "Z"


def json_text(value: dt.date | dt.timedelta) -> str:
    """A date, datetime or time inside MySQL's binary JSON as mysql-binlog-connector's
    JsonStringFormatter writes it: '2024-02-29 13:37:03.5', '-12:34:56.789' (the fraction
    without its trailing zeros)."""
    if isinstance(value, dt.timedelta):
        micros = value // _US
        sign, micros = ("-" if micros < 0 else ""), abs(micros)
        seconds, fraction = divmod(micros, US_PER_SECOND)
        text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    elif isinstance(value, dt.datetime):
        fraction = value.microsecond
        text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value:%H:%M:%S}"
    else:
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    return text + (f".{fraction:06d}".rstrip("0") if fraction else "")


class _ZeroDate:
    """A zero date ('0000-00-00', or one with a zero month or day) read from the binlog: no
    Python date holds it; the converter gives what Debezium gives (``types._zero_date``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ZERO_DATE"


ZERO_DATE = _ZeroDate()
