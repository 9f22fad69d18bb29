"""Floating-point numbers as Java writes them: Debezium's values of ``float`` and ``double``
columns are Java floats and doubles, which Kafka Connect's JSON converter writes with
``Float.toString`` / ``Double.toString`` - FloatingDecimal's digits on the JVM the oracle runs
(Java 17), not always the shortest that read back (Java 19 changed it, JDK-4511638)."""

from __future__ import annotations

import functools
import math
import struct

_FLOAT = struct.Struct("<f")
_FLOAT_BITS = struct.Struct("<I")
_DOUBLE_BITS = struct.Struct("<Q")


def float32(value: float) -> float:
    """A ``float`` column's value as Debezium emits it: a Java float, which Kafka Connect's JSON
    converter writes with ``Float.toString``. On the JVM the oracle runs (17; Java 19 changed
    it, JDK-4511638) that gives FloatingDecimal's digits, not always the shortest that read
    back as the float: 1.17549435E-38 and 2.2856919E9, not 1.1754944E-38 and 2.285692E9 (about
    one value in ten of those written with an exponent). The result is the double those
    digits read as, which is what a consumer of the JSON sees."""
    packed = _FLOAT.pack(float(value))  # float(): a ValueError for text, not a struct.error
    single: float = _FLOAT.unpack(packed)[0]
    if not single or not math.isfinite(single):
        return single
    return _java_float(_FLOAT_BITS.unpack(packed)[0])


@functools.lru_cache(maxsize=4096)  # keyed by the bits: 0.0 and -0.0 are equal floats
def _java_float(bits: int) -> float:
    fraction, exponent = bits & 0x7FFFFF, (bits >> 23) & 0xFF
    if exponent:
        digits, decimal_exponent = _java_digits(exponent - 127, (fraction | 1 << 23) << 29, 24)
    else:  # subnormal: normalised as FloatingDecimal does
        shift = 32 - fraction.bit_length() - 8
        digits, decimal_exponent = _java_digits(1 - shift - 127, fraction << shift << 29, fraction.bit_length())
    return float(f"{'-' if bits >> 31 else ''}0.{digits}e{decimal_exponent}")


def widened_float32(value: float) -> float:
    """``float(M,D)`` in a snapshot: its text read as a Java float, widened to double."""
    return float(_FLOAT.unpack(_FLOAT.pack(float(value)))[0])


def java_double_string(value: float) -> str:
    """``Double.toString`` as Java 17 writes it (FloatingDecimal's digits)."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if not value:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    bits = _DOUBLE_BITS.unpack(struct.pack("<d", value))[0]
    fraction, exponent = bits & ((1 << 52) - 1), (bits >> 52) & 0x7FF
    if exponent:
        digits, decimal_exponent = _java_digits(exponent - 1023, fraction | 1 << 52, 53)
    else:  # subnormal
        shift = 64 - fraction.bit_length() - 11
        digits, decimal_exponent = _java_digits(1 - shift - 1023, fraction << shift, fraction.bit_length())
    return ("-" if value < 0 else "") + _java_layout(digits, decimal_exponent)


def _java_layout(digits: str, exponent: int) -> str:
    """FloatingDecimal.getChars: plain for 1e-3 <= |x| < 1e7, else d.dddE±n."""
    if 0 < exponent < 8:
        whole, fraction = digits[:exponent].ljust(exponent, "0"), digits[exponent:]
        return f"{whole}.{fraction or '0'}"
    if -3 < exponent <= 0:
        return "0." + "0" * -exponent + digits
    return f"{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


# jdk.internal.math.FloatingDecimal.BinaryToASCIIBuffer.dtoa (JDK 8-18), on Python integers:
# the value is 0.<digits> * 10**exponent. Its int and long branches overflow as Java does.
_N_5_BITS = (0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61)
_INSIGNIFICANT_FOR_POW2 = (
    0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 9, 10, 10,
    10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19,
)  # fmt: skip


def _java_digits(bin_exp: int, fract_bits: int, n_significant: int) -> tuple[str, int]:
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = 53 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if n_tiny_bits == 0 and -21 <= bin_exp <= 62:  # an integer that fits a long
        p2 = bin_exp - n_significant - 1
        insignificant = _INSIGNIFICANT_FOR_POW2[p2] if 1 < p2 < len(_INSIGNIFICANT_FOR_POW2) else 0
        whole = fract_bits << (bin_exp - 52) if bin_exp >= 52 else fract_bits >> (52 - bin_exp)
        return _long_digits(whole, insignificant)
    # estimateDecExp: log10 from the mantissa's first-order series, in the same double arithmetic
    mantissa = (fract_bits & ((1 << 52) - 1)) / (1 << 52) + 1.0
    dec_exp = math.floor((mantissa - 1.5) * 0.289529654 + 0.176091259 + bin_exp * 0.301029995663981)
    b5, s5 = max(0, -dec_exp), max(0, dec_exp)
    b2, s2 = b5 + n_tiny_bits + bin_exp - (n_fract_bits - 1), s5 + n_tiny_bits
    m2 = b5 + n_tiny_bits + bin_exp - n_significant
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common - (n_fract_bits == 1)
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    width = (32 if b_bits < 32 and ten_s_bits < 32 else 64) if b_bits < 64 and ten_s_bits < 64 else 0
    b, s, m = (fract_bits >> tail_zeros) * 5**b5 << b2, 5**s5 << s2, 5**b5 << m2
    return _generate_digits(b, s, m, dec_exp, width)


def _long_digits(value: int, insignificant: int) -> tuple[str, int]:
    if insignificant:
        value, residue = divmod(value, 10**insignificant)
        value += residue >= 10**insignificant >> 1
    text = str(value)
    return text.rstrip("0"), len(text) + insignificant


def _wrap(value: int, width: int) -> int:
    """Java's int (32) or long (64) arithmetic; 0: FDBigInteger's, which does not overflow."""
    if not width:
        return value
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def _generate_digits(b: int, s: int, m: int, dec_exp: int, width: int) -> tuple[str, int]:
    tens = s * 10
    digits: list[int] = []
    first = True
    while True:
        q, b = divmod(b, s)
        b *= 10
        m = _wrap(m * 10, width)
        if width and not first and m <= 0:  # "m might overflow": stop
            low = high = True
        else:  # FDBigInteger's test is >=, the int and long branches' >
            low, high = b < m, (b + m >= tens) if not width else _wrap(b + m, width) > tens
        if first and q == 0 and not high:
            dec_exp -= 1  # the estimate was one too high: drop the leading zero
        else:
            digits.append(q)
        if first and (dec_exp < -3 or dec_exp >= 8):
            low = high = False  # E-form: at least two digits
        first = False
        if low or high:
            break
    difference = _wrap((b << 1) - tens, width) if width or (high and low) else 0
    if high and (not low or difference > 0 or (difference == 0 and digits[-1] & 1)):
        return _rounded_up(digits, dec_exp + 1)
    return "".join(map(str, digits)), dec_exp + 1


def _rounded_up(digits: list[int], exponent: int) -> tuple[str, int]:
    i = len(digits) - 1
    while i > 0 and digits[i] == 9:
        digits[i] = 0
        i -= 1
    if digits[i] == 9:  # carry out of the first digit
        digits[0] = 1
        exponent += 1
    else:
        digits[i] += 1
    return "".join(map(str, digits)), exponent
