"""What a table's Connect schemas need from the catalog beyond the columns' types: nullability,
defaults and the source type names (one query per table schema, only with schemas enabled), and
the schemas themselves attached to a planned table (:func:`attach_schemas`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_cdc.engine.sources.postgres.catalog import Catalog, default_literal
from airflow_cdc.engine.sources.postgres.connect_schema import ColumnFacts, SchemaSettings, table_schemas
from airflow_cdc.engine.sources.postgres.fallbacks import fallback_value
from airflow_cdc.engine.sources.postgres.types import ValueModes, converter_for

if TYPE_CHECKING:
    from airflow_cdc.engine.sources.postgres.changes import TableSchema

_COLUMNS = """
    select a.attname, a.attnotnull, pg_get_expr(d.adbin, d.adrelid), format_type(a.atttypid, a.atttypmod)
    from pg_attribute a
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
    facts = column_facts(catalog, relation_oid, columns, {c.name for c in table.columns}, modes)
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
) -> list[ColumnFacts]:
    """Facts of the ``carried`` columns among ``columns`` (name, type oid, typmod), in order."""
    rows = {row[0]: row[1:] for row in catalog.connection.execute(_COLUMNS, (relation_oid,)).fetchall()}
    facts = []
    for name, oid, typmod in columns:
        if name not in carried:
            continue
        # A column the relation names but the catalog no longer has (dropped since): nullable.
        not_null, default, type_sql = rows.get(name, (False, None, ""))
        info = catalog.type(oid)
        source_type = info.name
        if default and "nextval(" in default and info.name in _SERIALS:
            source_type = _SERIALS[info.name]
        fact = ColumnFacts(name, oid, typmod, bool(not_null), source_type=source_type)
        if default is not None:
            fact.has_default, fact.default = True, _default(catalog, default, type_sql, oid, typmod, not_null, modes)
        facts.append(fact)
    return facts


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
