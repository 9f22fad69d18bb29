"""What a table's Connect schemas need from the catalog beyond the columns' types: nullability,
defaults and the source type names (one query per table schema, only with schemas enabled), and
the schemas themselves attached to a planned table (:func:`attach_schemas`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.sources.postgres.catalog import Catalog, default_literal
from airflow_cdc.engine.sources.postgres.connect_schema import ColumnFacts, source_parameters, table_schemas
from airflow_cdc.engine.sources.postgres.fallbacks import fallback_value
from airflow_cdc.engine.sources.postgres.types import ValueModes, converter_for

if TYPE_CHECKING:
    from airflow_cdc.engine.sources.postgres.changes import TableSchema

log = logging.getLogger(__name__)

_COLUMNS = """
    select a.attname, a.atttypid::int, a.atttypmod, a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
        format_type(a.atttypid, a.atttypmod), t.typtypmod
    from pg_attribute a
    join pg_type t on t.oid = a.atttypid
    left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where a.attrelid = %s and a.attnum > 0 and not a.attisdropped
"""

#: pgjdbc reports an integer column whose default draws from a sequence as a serial type.
_SERIALS = {"int2": "smallserial", "int4": "serial", "int8": "bigserial"}


def attach_schemas(
    table: TableSchema,
    relation_oid: int,
    columns: Sequence[tuple[str, int, int]],
    *,
    catalog: Catalog,
    modes: ValueModes,
    settings: SchemaSettings,
) -> None:
    """Build ``table``'s key and value schemas (its ``connect``) for the columns it carries."""
    facts = column_facts(catalog, relation_oid, columns, {c.name for c in table.columns}, modes, settings.snapshot)
    table.connect = table_schemas(
        table.topic,
        table.schema,
        table.name,
        facts,
        table.key,
        modes=modes,
        lookup=catalog.type,
        enum_values=lambda oid: enum_values(catalog, oid),
        settings=settings,
    )


def column_facts(
    catalog: Catalog,
    relation_oid: int,
    columns: Sequence[tuple[str, int, int]],
    carried: set[str],
    modes: ValueModes,
    snapshot: bool = False,
) -> list[ColumnFacts]:
    """Facts of the ``carried`` columns among ``columns`` (name, type oid, typmod), in order."""
    rows = current_columns(catalog, relation_oid, columns)
    facts = []
    for name, oid, typmod in columns:
        if name not in carried:
            continue
        # A column the relation names but the catalog no longer has (dropped since): nullable.
        _, _, not_null, default, type_sql, domain_typmod = rows.get(name, (oid, typmod, False, None, "", -1))
        info = catalog.type(oid)
        source_type = info.name
        if default and "nextval(" in default and info.name in _SERIALS:
            source_type = _SERIALS[info.name]
        fact = ColumnFacts(name, oid, typmod, bool(not_null), source_type=source_type)
        length, scale = source_size(catalog, oid, typmod if typmod >= 0 else domain_typmod, snapshot)
        fact.parameters = source_parameters(name, source_type, length, scale)
        if default is not None:
            fact.has_default, fact.default = True, _default(catalog, default, type_sql, oid, typmod, not_null, modes)
        facts.append(fact)
    return facts


#: How long a RELATION waits for its transaction to become visible to the catalog's reads.
CATALOG_WAIT_S = 5.0


def current_columns(
    catalog: Catalog, relation_oid: int, columns: Sequence[tuple[str, int, int]]
) -> dict[str, tuple[Any, ...]]:
    """The catalog's rows of the table's columns, once they show every column of ``columns``
    (name, type, typmod) as they are. The walsender sends a transaction as soon as its commit
    record is flushed, a moment before the commit is visible to other sessions: a RELATION
    decoded from an ``ALTER TABLE`` can arrive while the catalog still shows the table as it
    was (measured: the new column's default and NOT NULL missing, in one run of three)."""
    wanted = {name: (oid, typmod) for name, oid, typmod in columns}
    deadline = time.monotonic() + CATALOG_WAIT_S
    while True:
        rows = {row[0]: row[1:] for row in catalog.connection.execute(_COLUMNS, (relation_oid,)).fetchall()}
        if all(name in rows and tuple(rows[name][:2]) == shape for name, shape in wanted.items()):
            return rows
        if time.monotonic() > deadline:
            log.warning(
                "the catalog of relation %s does not show the columns its RELATION message names (%s) after %.0fs: "
                "their nullability and defaults in the schema are the catalog's as it is",
                relation_oid,
                ", ".join(sorted(set(wanted) - set(rows))) or "types differ",
                CATALOG_WAIT_S,
            )
            return rows
        time.sleep(0.005)  # the commit becomes visible within moments


def _default(
    catalog: Catalog, expression: str, type_sql: str, oid: int, typmod: int, not_null: bool, modes: ValueModes
) -> Any:
    """Debezium's default: a constant's value; else, for a NOT NULL column, the type's fallback
    (its converter turns the unresolved null into it); else none."""
    convert = converter_for(oid, typmod, modes, catalog.type)
    text = catalog.constant_text(expression, type_sql) if default_literal(expression) is not None else None
    if text is not None and convert is not None:
        try:
            return convert(text)
        except (ValueError, ArithmeticError):
            pass  # a constant the converter cannot read: as an expression
    return fallback_value(oid, typmod, modes, catalog.type) if not_null else None


def enum_values(catalog: Catalog, oid: int) -> list[str]:
    rows = catalog.connection.execute(
        "select enumlabel from pg_enum where enumtypid = %s order by enumsortorder", (oid,)
    ).fetchall()
    return [r[0] for r in rows]


#: pgjdbc's length of a type it knows no length for (its ``unknownLength``: Integer.MAX_VALUE).
_UNKNOWN_LENGTH = 2147483647


def source_size(catalog: Catalog, oid: int, typmod: int, snapshot: bool) -> tuple[int | None, int | None]:
    """A column's ``__debezium.source.column.length`` and ``.scale``: pgjdbc's precision and
    scale of its type (TypeInfoCache), a domain's by its base type and the domain's typmod, an
    array's by its element. The snapshot reads them from JDBC's column metadata, where an
    unconstrained numeric (not numeric[]) has size 0 and no scale; the stream from the
    RELATION's typmod, where a size of 0 becomes the type's display size (PgOutput's
    ColumnMetaData). The oracle's variant ``schemas-propagate-all`` shows every type's."""
    info = catalog.type(oid)
    while info.kind == "d" and info.base_oid:
        info = catalog.type(info.base_oid)
    array = info.category == "A" and bool(info.element_oid)
    if array:
        info = catalog.type(info.element_oid)
    name = info.name
    jdbc = snapshot and not array  # JDBC's metadata of an array column is its element's, as streamed
    if jdbc and name == "numeric" and typmod < 0:
        return 0, None
    length = _precision(name, typmod)
    if length == 0 and not jdbc:
        length = _display_size(name, typmod)
    return length, _scale(name, typmod)


def _precision(name: str, typmod: int) -> int:
    fixed = {"int2": 5, "int4": 10, "oid": 10, "int8": 19, "float4": 8, "float8": 17, "char": 1, "bool": 1}
    if name in fixed:
        return fixed[name]
    if name == "numeric":
        return 0 if typmod == -1 else ((typmod - 4) >> 16) & 0xFFFF
    if name in ("bpchar", "varchar"):
        return _UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if name in ("date", "time", "timetz", "interval", "timestamp", "timestamptz"):
        return _display_size(name, typmod)
    if name == "bit" or (name == "varbit" and typmod != -1):
        return typmod
    return _UNKNOWN_LENGTH


def _scale(name: str, typmod: int) -> int:
    if name in ("float4", "float8"):
        return 8 if name == "float4" else 17
    if name == "numeric":
        return 0 if typmod == -1 else (typmod - 4) & 0xFFFF
    if name in ("time", "timetz", "timestamp", "timestamptz"):
        return 6 if typmod == -1 else typmod
    if name == "interval":
        return 6 if typmod == -1 else typmod & 0xFFFF
    return 0


def _display_size(name: str, typmod: int) -> int:
    if name == "date":
        return 13
    if name in ("time", "timetz", "timestamp", "timestamptz"):
        # The fraction's digits and its point; time(1) prints 2 digits (pgjdbc's comment).
        second = {-1: 7, 0: 0, 1: 3}.get(typmod, typmod + 1)
        base = {"time": 8, "timetz": 14, "timestamp": 22, "timestamptz": 28}[name]
        return base + second
    if name == "interval":
        return 49
    if name == "numeric":
        if typmod == -1:
            return 131089
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return 1 + precision + (1 if scale else 0)
    if name in ("int2", "int4", "oid", "int8", "float4", "float8"):
        return {"int2": 6, "int4": 11, "oid": 10, "int8": 20, "float4": 15, "float8": 25}[name]
    if name in ("char", "bool"):
        return 1
    return _precision(name, typmod)
