"""Calendar arithmetic for PostgreSQL's text output (``DateStyle=ISO``, ``TimeZone=UTC``,
``IntervalStyle=iso_8601``), without ``datetime``: it covers BC dates and years past 9999,
which ``datetime`` cannot, and it is faster on the hot path."""

from __future__ import annotations

import decimal
import math
import re

US_PER_DAY = 86_400_000_000
#: Debezium's stand-ins for 'infinity' / '-infinity' timestamps: pgjdbc's DATE_POSITIVE_INFINITY /
#: DATE_NEGATIVE_INFINITY (milliseconds there), which PostgresValueConverter reads as MICROseconds
#: since the epoch (POSITIVE_INFINITY_INSTANT = toInstantFromMicros(...)). MicroTimestamp emits them
#: as they are, Timestamp and Connect's Timestamp in milliseconds (/ 1000, exact): all fit an int64.
POSITIVE_INFINITY_US = 9_223_372_036_825_200_000
NEGATIVE_INFINITY_US = -9_223_372_036_832_400_000
#: What Debezium emits for timestamp 'infinity' / '-infinity' in microseconds (MicroTimestamp):
#: Long.MAX_VALUE / Long.MIN_VALUE. In milliseconds (Timestamp, Connect's Timestamp) it emits
#: POSITIVE_INFINITY_US / NEGATIVE_INFINITY_US unchanged (the oracle shows both).
POSITIVE_INFINITY_MICRO_TIMESTAMP = 2**63 - 1
NEGATIVE_INFINITY_MICRO_TIMESTAMP = -(2**63)
#: Debezium's streamed 'infinity' / '-infinity' dates: +5877611-06-21 and -5877611-06-22 as days
#: since the epoch (the oracle shows these).
POSITIVE_INFINITY_DAYS = 2_146_033_979
NEGATIVE_INFINITY_DAYS = -2_147_472_691
#: ... and its snapshot's: pgjdbc reads them as java.sql.Date(DATE_POSITIVE_INFINITY) /
#: (DATE_NEGATIVE_INFINITY), whose LocalDate are these days.
SNAPSHOT_POSITIVE_INFINITY_DAYS = -622_191_234
SNAPSHOT_NEGATIVE_INFINITY_DAYS = -625_821_272
#: Debezium's MicroDuration: an average month.
DAYS_PER_MONTH_AVG = 365.25 / 12


class TemporalParseError(ValueError):
    pass


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, year 0 being 1 BC (H. Hinnant's
    algorithm; Python's ``//`` already floors, so eras need no C-style adjustment for BC)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    year = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return year + (month <= 2), month, day


def parse_date(text: str) -> int:
    """'2024-02-29' or '0044-03-15 BC' -> days since the epoch."""
    bc = text.endswith(" BC")
    if bc:
        text = text[:-3]
    try:
        year, month, day = (int(part) for part in text.split("-"))
    except ValueError:
        raise TemporalParseError(f"not an ISO date: {text!r}") from None
    if bc:
        year = 1 - year  # 1 BC is year 0 in the proleptic calendar
    return days_from_civil(year, month, day)


def parse_time_us(text: str) -> int:
    """'13:37:03.5' -> microseconds since midnight (24:00:00 is allowed)."""
    try:
        hours, minutes, seconds = text.split(":")
        whole, _, fraction = seconds.partition(".")
        micros = int((fraction + "000000")[:6]) if fraction else 0
        return ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + micros
    except ValueError:
        raise TemporalParseError(f"not a time: {text!r}") from None


_OFFSET = re.compile(r"([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?$")


def split_offset(text: str) -> tuple[str, int]:
    """'13:37:03+05:30' -> ('13:37:03', offset in seconds)."""
    match = _OFFSET.search(text)
    if not match:
        return text, 0
    sign = -1 if match.group(1) == "-" else 1
    seconds = int(match.group(2)) * 3600 + int(match.group(3) or 0) * 60 + int(match.group(4) or 0)
    return text[: match.start()], sign * seconds


def parse_timestamp_us(text: str) -> int:
    """'2024-02-29 13:37:03.5[+00]' -> microseconds since the epoch (UTC if it has an offset)."""
    bc = text.endswith(" BC")
    if bc:
        text = text[:-3]
    date, sep, time = text.partition(" ")
    if not sep:
        raise TemporalParseError(f"not a timestamp: {text!r}")
    time, offset = split_offset(time)
    days = parse_date(date + (" BC" if bc else ""))
    return days * US_PER_DAY + parse_time_us(time) - offset * 1_000_000


def format_iso_utc(epoch_us: int, fraction_digits: int = 0) -> str:
    """Debezium's ZonedTimestamp: ISO-8601 in UTC and 'Z'; the fraction has exactly
    ``fraction_digits`` digits (the column's precision), or, for 0, none when it is zero and
    no trailing zeros otherwise (ISO_OFFSET_DATE_TIME)."""
    days, micros = divmod(epoch_us, US_PER_DAY)
    year, month, day = civil_from_days(days)
    if fraction_digits:
        seconds, fraction = divmod(micros, 1_000_000)
        clock = format_time(seconds * 1_000_000) + "." + f"{fraction:06d}"[:fraction_digits]
        return f"{_year(year)}-{month:02d}-{day:02d}T{clock}Z"
    return f"{_year(year)}-{month:02d}-{day:02d}T{format_time(micros)}Z"


def format_time(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{fraction:06d}".rstrip("0") if fraction else text


def _year(year: int) -> str:
    """As Java's ISO formatters print a proleptic year (``SignStyle.EXCEEDS_PAD``, width 4):
    ``0043``, ``-0043`` (44 BC), ``+12345``."""
    if 0 <= year <= 9999:
        return f"{year:04d}"
    return f"+{year}" if year > 0 else f"-{-year:04d}"


_INTERVAL = re.compile(
    r"P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?\d+(?:\.\d+)?)S)?)?$"
)


def parse_interval(text: str) -> tuple[int, int, int, int, int, float]:
    """ISO-8601 interval text -> (years, months, days, hours, minutes, seconds)."""
    match = _INTERVAL.match(text)
    if not match or text in ("P", "PT"):
        raise TemporalParseError(f"not an ISO-8601 interval (is IntervalStyle iso_8601?): {text!r}")
    g = match.groupdict()
    return (
        int(g["y"] or 0),
        int(g["mo"] or 0),
        int(g["d"] or 0),
        int(g["h"] or 0),
        int(g["mi"] or 0),
        float(g["s"] or 0),
    )


def interval_micros(text: str) -> int:
    """Debezium's MicroDuration: months count as 30.4375 days."""
    years, months, days, hours, minutes, seconds = parse_interval(text)
    total_days = (years * 12 + months) * DAYS_PER_MONTH_AVG + days
    return round(total_days * US_PER_DAY + ((hours * 60 + minutes) * 60 + seconds) * 1_000_000)


def interval_iso_string(text: str) -> str:
    """Debezium's ``interval.handling.mode=string``: ``Interval.toIsoString`` of pgjdbc's
    PGInterval, every field present ('P1Y2M0DT0H0M0S'). The seconds go through PGInterval's
    double (whole seconds plus rounded microseconds) and ``BigDecimal.valueOf(double)
    .stripTrailingZeros().toPlainString()``."""
    years, months, days, hours, minutes, seconds = parse_interval(text)
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{_pginterval_seconds(seconds)}S"


def _pginterval_seconds(seconds: float) -> str:
    whole = int(seconds)  # PGInterval.setSeconds: (int) seconds, Math.round of the rest in micros
    micros = math.floor((seconds - whole) * 1_000_000 + 0.5)
    value = whole + micros / 1_000_000
    if value == 0:
        return "0"
    # repr() is the shortest text that reads back as the double, as Double.toString here.
    plain = f"{decimal.Decimal(repr(value)).normalize():f}"
    return plain
