"""Debezium's JSON values -> what a SQL target's driver accepts, by the target column's type.

The inverse of the engine's forward conversions (``airflow_cdc/engine/sources/postgres/types.py``
and its neighbours ``numeric``, ``temporal``, ``bits``, ``hstore``, ``geometry``), which are
Debezium's. A value arrives as *JSON text* (the latest frame's ``after``: a JSON string without
its quotes, a number or boolean as its JSON text, an object or array as JSON text, null as
None), and its encoding depends on the connector's value-handling modes (:class:`Modes`) and on
the *source* column's type. The target column's type stands in for the source's: give the
target the source's types (numeric scales and temporal precisions included: a ``timestamp(3)``
arrives in milliseconds, a ``timestamp(6)`` in microseconds, and nothing in the value tells).

PostgreSQL targets get PostgreSQL's *text input form* (a ``str`` psycopg sends untyped, so the
server parses it as the column's type) wherever a Python value would lose something: BC dates,
years past 9999, infinities, arrays of any element type, geometry, hstore. Values whose JSON
text already is that form (integers, floats, booleans, strings, ``timetz``, ISO intervals) pass
through untouched; ``bytea`` becomes ``bytes``. MySQL/MariaDB targets get ``int``, ``Decimal``,
``float``, ``bytes`` and ``str`` (temporal values as their text: the connection's time zone
should be UTC).

:func:`decoder_for` builds one function per column, once; calling it is the hot path. A value
that cannot be decoded raises :class:`DecodeError`, naming the column, the value and the
setting to check.

What Debezium's encodings lose stays lost: ``numeric`` NaN and infinities in ``precise`` mode
(null), digits beyond a double's in ``double`` mode, microseconds under
``time.precision.mode=connect``, an interval's months in ``numeric`` interval mode (30.4375-day
months: decoded as days and time), a ``timetz``'s offset (UTC), a ``varbit``'s leading zeros, a
polygon whose text repeats its first point at the end (the repeat is dropped).

The modules: :mod:`.columns` (what a decoder is built from), :mod:`.decoding` (:func:`decoder_for`
and its error), :mod:`.semantic_types` (Debezium's and Kafka Connect's types both dialects share),
:mod:`.postgres` and :mod:`.postgres_geometry`, :mod:`.mysql`.

Pure Python: no pyspark, no Airflow; it runs on Spark executors. Debezium's calendar constants
(the stand-ins for infinite dates and timestamps) are the engine's, imported from
``airflow_cdc.engine.sources.postgres.temporal``, not copied: the engine is pure Python too, and
Spark code may import it (never the reverse).
"""

from airflow_cdc.spark.values.columns import ColumnType, DecodeError, Decoder, Modes, json_text, pass_through
from airflow_cdc.spark.values.decoding import decoder_for

__all__ = [
    "ColumnType",
    "DecodeError",
    "Decoder",
    "Modes",
    "decoder_for",
    "json_text",
    "pass_through",
]
