"""Row events' bytes -> column values, for every column type, whatever ``binlog_row_metadata``.

Why we decode rows ourselves instead of letting mysql-replication do it: the library takes
signedness, character sets and ENUM/SET members from the table map's *optional* metadata, which
only ``binlog_row_metadata=FULL`` writes. With the server's default (``NO_LOG`` on MariaDB,
``MINIMAL`` on MySQL) it read unsigned maxima as -1, ENUM and SET values as None and binary
values as UTF-8 text - wrong values, or a UnicodeDecodeError on every restart. Debezium reads
the same events with its own table definitions, and so do we: the table map gives each
column's binlog type and the metadata that sizes its values (always written), the schema
history (``schema.py``) gives what a value means - signed or not, its character set, its ENUM
and SET members, text or bytes. Both settings decode the same.

Sans-IO: :func:`compile_table` turns a table map's columns and the history's definition into a
:class:`RowDecoder` (a :class:`~.schema.SchemaMismatchError` when they cannot be the same table),
and :meth:`RowDecoder.decode` turns the event's row bytes into value tuples, or raises the
engine's :class:`~airflow_cdc.engine.errors.DecodeError` (``RowDecodeError`` here) naming the
column. Values are what the converters of ``types.py`` take (mysql-replication's, as it yields
them with full metadata): int, float, Decimal, str, bytes, date, datetime, timedelta, a set of
SET members, BIT as '0'/'1' text, MySQL's binary JSON parsed; a zero date is
:data:`~.temporal.ZERO_DATE` (the library's reason-carrying None).
The rarer types' readers are in ``binlog_values.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from airflow_cdc.engine.errors import DecodeError
from airflow_cdc.engine.sources.mysql import binlog_values as bv
from airflow_cdc.engine.sources.mysql.binlog_values import T
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.schema import SchemaMismatchError
from airflow_cdc.engine.sources.mysql.types import MySqlColumn, enum_options

#: The engine's DecodeError under the name it had here: a row's bytes that do not decode,
#: ``RowDecodeError(column, reason)`` (column None: the row's framing).
RowDecodeError = DecodeError


# Column kinds: the common ones are read inline by RowDecoder._values, the rest by a function.
_FIXED, _TEXT, _BYTES, _DEC, _CALL = range(5)
_STRING_KINDS = (_TEXT, _BYTES)

_LITTLE = {
    (T.TINY, False): struct.Struct("<b"),
    (T.TINY, True): struct.Struct("<B"),
    (T.SHORT, False): struct.Struct("<h"),
    (T.SHORT, True): struct.Struct("<H"),
    (T.LONG, False): struct.Struct("<i"),
    (T.LONG, True): struct.Struct("<I"),
    (T.LONGLONG, False): struct.Struct("<q"),
    (T.LONGLONG, True): struct.Struct("<Q"),
    (T.FLOAT, False): struct.Struct("<f"),
    (T.DOUBLE, False): struct.Struct("<d"),
}
_FLOATS = (T.FLOAT, T.DOUBLE)

#: One column's reader: (kind, struct unpacker / length-prefix size / function, size or codec).
_Reader = tuple[int, Any, Any]

_BLOBS = frozenset((T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB))
_STRINGS = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING))
_TEXT_TYPES = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"))

#: The binlog types a column of each information_schema DATA_TYPE is written as; a type not
#: here (MariaDB's uuid, inet4, inet6, vector...) is decoded by its binlog type unchecked.
_WRITTEN_AS: dict[str, frozenset[int]] = {
    **dict.fromkeys(("tinyint", "boolean", "bool"), frozenset((T.TINY,))),
    "smallint": frozenset((T.SHORT,)),
    "mediumint": frozenset((T.INT24,)),
    **dict.fromkeys(("int", "integer"), frozenset((T.LONG,))),
    "bigint": frozenset((T.LONGLONG,)),
    "float": frozenset((T.FLOAT,)),
    **dict.fromkeys(("double", "real"), frozenset((T.DOUBLE,))),
    **dict.fromkeys(("decimal", "numeric"), frozenset((T.NEWDECIMAL,))),
    "year": frozenset((T.YEAR,)),
    "date": frozenset((T.DATE, T.NEWDATE)),
    "time": frozenset((T.TIME, T.TIME2)),
    "datetime": frozenset((T.DATETIME, T.DATETIME2)),
    "timestamp": frozenset((T.TIMESTAMP, T.TIMESTAMP2)),
    **dict.fromkeys(("char", "binary"), frozenset((T.STRING,))),
    **dict.fromkeys(("varchar", "varbinary"), frozenset((T.VARCHAR, T.VAR_STRING))),
    **dict.fromkeys(("tinytext", "text", "mediumtext", "longtext"), _BLOBS),
    **dict.fromkeys(("tinyblob", "blob", "mediumblob", "longblob"), _BLOBS),
    "json": frozenset((T.JSON, *_BLOBS)),  # MariaDB's json is a longtext
    "enum": frozenset((T.ENUM,)),
    "set": frozenset((T.SET,)),
    "bit": frozenset((T.BIT,)),
    **dict.fromkeys(bv.GEOMETRY_TYPES, frozenset((T.GEOMETRY,))),
}


class RowDecoder:
    """The rows of one table's row events, as one table map and one definition describe them."""

    def __init__(self, readers: Sequence[_Reader], names: Sequence[str]) -> None:
        self._readers = tuple(readers)
        self._null_bytes = (len(self._readers) + 7) // 8
        self.names = tuple(names)
        #: The columns-present bitmap of an event that has every column.
        self.full_bitmap = ((1 << len(self._readers)) - 1).to_bytes(self._null_bytes, "little")

    def missing(self, bitmap: bytes) -> list[str]:
        """The columns a columns-present bitmap leaves out (a row image that is not FULL)."""
        return [n for i, n in enumerate(self.names) if i >> 3 >= len(bitmap) or not bitmap[i >> 3] & (1 << (i & 7))]

    def decode(self, data: bytes, images: int) -> list[tuple[tuple[Any, ...], ...]]:
        """Every row of ``data`` (the event's bytes after its column bitmaps): ``images`` value
        tuples each (1 for a write or delete, 2 - before, after - for an update)."""
        rows: list[tuple[tuple[Any, ...], ...]] = []
        pos, end, nulls_size = 0, len(data), self._null_bytes
        while pos < end:
            row = []
            for _ in range(images):
                nulls = data[pos : pos + nulls_size]
                pos += nulls_size
                values, pos = self._values(data, pos, nulls)
                row.append(values)
            rows.append(tuple(row))
        if pos != end:
            raise DecodeError(None, f"the rows end {pos - end} bytes past the event's end")
        return rows

    def _values(self, data: bytes, pos: int, nulls: bytes) -> tuple[tuple[Any, ...], int]:
        # The common kinds inline (this loop is the stream's hottest), the others by a call.
        values: list[Any] = []
        append = values.append
        index = 0
        try:
            for index, (kind, read, size) in enumerate(self._readers):
                if nulls[index >> 3] & (1 << (index & 7)):
                    append(None)
                elif kind == _FIXED:
                    append(read(data, pos)[0])
                    pos += size
                elif kind in _STRING_KINDS:
                    if read == 1:
                        length = data[pos]
                    elif read == 2:
                        length = data[pos] | data[pos + 1] << 8
                    else:
                        length = int.from_bytes(data[pos : pos + read], "little")
                    pos += read
                    raw = data[pos : pos + length]
                    if len(raw) != length:
                        raise IndexError("a value runs past the event's end")
                    append(raw.decode(size) if kind == _TEXT else raw)
                    pos += length
                elif kind == _DEC:
                    number, pos = bv.decimal(data, pos, size)
                    append(number)
                else:
                    value, pos = read(data, pos)
                    append(value)
        except (IndexError, ValueError, struct.error, UnicodeDecodeError, ArithmeticError) as exc:
            raise DecodeError(self.names[index], _reason(exc)) from exc
        return tuple(values), pos


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"the bytes are not {exc.encoding} ({exc.reason} at byte {exc.start})"
    if isinstance(exc, IndexError | struct.error):
        return "the value runs past the event's end"
    return str(exc)


def compile_table(binlog_columns: Sequence[Any], table: Table) -> RowDecoder:
    """A decoder for one table map's columns (mysql-replication's ``Column`` objects: ``type``
    and the type's metadata) read as the history's ``table``. SchemaMismatchError when the two
    cannot describe the same table: another column count, or a column written as a binlog
    type its definition cannot have (the history missed a DDL)."""
    name = f"{table.database}.{table.name}"
    if len(binlog_columns) != len(table.columns):
        raise SchemaMismatchError(
            f"{name}: the binlog has {len(binlog_columns)} columns where the schema history has "
            f"{len(table.columns)} ({', '.join(c.name for c in table.columns)}): the history missed a DDL; "
            "take a new snapshot (reset the offsets, snapshot.mode=initial or when_needed)"
        )
    readers = []
    for binlog, column in zip(binlog_columns, table.columns, strict=True):
        written_as = _WRITTEN_AS.get(column.data_type)
        if written_as is not None and binlog.type not in written_as:
            raise SchemaMismatchError(
                f"{name}: column {column.name} is {bv.type_name(binlog.type)} in the binlog where the schema history "
                f"has {column.column_type}: the history missed a DDL; take a new snapshot (reset the offsets, "
                "snapshot.mode=initial or when_needed)"
            )
        try:
            readers.append(_reader(binlog, column))
        except (ValueError, LookupError) as exc:
            raise SchemaMismatchError(f"{name}: column {column.name}: {exc}") from exc
    return RowDecoder(readers, [c.name for c in table.columns])


def _reader(binlog: Any, column: MySqlColumn) -> _Reader:
    kind = binlog.type
    if kind in _FLOATS:
        unpack = _LITTLE[kind, False]
        return (_FIXED, unpack.unpack_from, unpack.size)
    if (kind, column.unsigned) in _LITTLE:
        unpack = _LITTLE[kind, column.unsigned]
        return (_FIXED, unpack.unpack_from, unpack.size)
    if kind == T.NEWDECIMAL:
        return (_DEC, None, bv.decimal_layout(binlog.precision, binlog.decimals))
    if kind in _STRINGS:
        return _string_reader(2 if binlog.max_length > 255 else 1, column)
    if kind in _BLOBS:
        return _string_reader(binlog.length_size, column)
    if kind == T.ENUM:
        return (_CALL, bv.enum_reader(binlog.size, enum_options(column.column_type)), None)
    if kind == T.SET:
        return (_CALL, bv.set_reader(binlog.size, enum_options(column.column_type)), None)
    return (_CALL, bv.reader(binlog, column), None)


def _string_reader(prefix: int, column: MySqlColumn) -> _Reader:
    """Text decoded with its character set's codec (strictly: the server stored valid text);
    binary strings, and text of a character set Python has no codec for, as bytes."""
    codec = bv.codec(column.charset) if column.data_type in _TEXT_TYPES else None
    return (_TEXT, prefix, codec) if codec else (_BYTES, prefix, None)
