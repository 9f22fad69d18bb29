"""PostgreSQL positions: WAL LSNs (``0/16B3748``), and how the source's offsets compare.

An offset says what is committed (``changes.py``): everything up to ``lsn_commit`` (the end of
the last transaction delivered completely), plus, inside the next transaction (``txId`` set),
its records up to (``lsn``, ``event``). So offsets order by ``lsn_commit``, then by how far
into the next transaction they are. An offset of an unfinished initial snapshot
(``snapshot: true``) covers no position at all: its ``lsn`` is where streaming will begin, but
rows of tables not yet read are not delivered, so it comes before every streaming offset.

Pure (no psycopg): the CLI and a sensor can compare positions without a database driver.
"""

from __future__ import annotations

import re

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.positions import PositionCodec
from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.sources.postgres.pgoutput import format_lsn

#: An LSN as PostgreSQL prints it: the high and the low 32 bits in hex, each at most FFFFFFFF.
#: (int(x, 16) alone took "0/100000000", which is 1/0, and "0x1/ 2_0" as well.)
_LSN = re.compile(r"(?P<high>0*[0-9A-Fa-f]{1,8})/(?P<low>0*[0-9A-Fa-f]{1,8})")
_HALF = re.compile(r"[0-9A-Fa-f]+")
_NUMBER = re.compile(r"[0-9]+")

#: Sort key of an unfinished snapshot: before every LSN.
_SNAPSHOT = (-1, 0, 0, 0)


def lsn_offset(lsn: int) -> dict[str, int | None]:
    """The offset of "everything up to ``lsn`` is committed": the stream resumes after it."""
    return {"lsn": lsn, "lsn_proc": lsn, "lsn_commit": lsn, "event": 0, "txId": None, "ts_usec": 0}


def _int(offset: Offset, key: str, default: int = 0) -> int:
    value = offset.get(key)
    return default if value is None else int(value)


def _key(offset: Offset) -> tuple[int, int, int, int]:
    if offset.get("snapshot"):
        return _SNAPSHOT
    commit = _int(offset, "lsn_commit", _int(offset, "lsn"))
    if offset.get("txId") is None:  # between transactions: everything up to lsn_commit
        return (commit, 0, 0, 0)
    return (commit, 1, _int(offset, "lsn"), _int(offset, "event"))


class PostgresPositions(PositionCodec):
    example = "an LSN like 0/16B3748"
    lag_unit = "bytes"

    def parse(self, text: str) -> Offset:
        text = text.strip()
        if _NUMBER.fullmatch(text):  # pg_lsn as a number, as some tools print it
            lsn = int(text)
            if lsn >= 1 << 64:
                raise OffsetError(f"{text!r} is not {self.example}: a number of at most 2^64-1")
            return lsn_offset(lsn)
        match = _LSN.fullmatch(text)
        if match is None:
            raise OffsetError(f"{text!r} is not {self.example}: {_what_is_wrong(text)}")
        return lsn_offset((int(match["high"], 16) << 32) | int(match["low"], 16))

    def format(self, offset: Offset) -> str:
        """The LSN up to which everything is committed (``lsn_commit``); for an unfinished
        snapshot, the LSN streaming will begin at."""
        return format_lsn(_int(offset, "lsn_commit", _int(offset, "lsn")))

    def compare(self, a: Offset, b: Offset) -> int:
        key_a, key_b = _key(a), _key(b)
        return (key_a > key_b) - (key_a < key_b)

    def lag(self, committed: Offset, current: Offset) -> int | None:
        """WAL bytes between the committed LSN and the current one (None during a snapshot)."""
        if committed.get("snapshot") or current.get("snapshot"):
            return None
        return max(0, _key(current)[0] - _key(committed)[0])


def _what_is_wrong(text: str) -> str:
    high, sep, low = text.partition("/")
    form = "the form is X/Y, the high and the low 32 bits of the WAL position in hex"
    if not sep or not all(_HALF.fullmatch(half) for half in (high, low)):
        return form
    too_long = " and ".join(name for name, half in (("high", high), ("low", low)) if len(half.lstrip("0") or "0") > 8)
    return f"{form}, each at most FFFFFFFF; its {too_long} half is longer"


POSTGRES_POSITIONS = PostgresPositions()
