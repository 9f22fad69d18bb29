"""The SQL of PostgreSQL's incremental-snapshot chunks, composed and never run here: key-ordered
ranges, the last key of a table, the boundaries that split a window among several readers, and
the statements that write a watermark.

Chunk keys travel as the server's text for each key column and are compared by the server
(``(k1, k2) > ('text1'::type1, 'text2'::type2)``, the texts as literals), so composite keys and
any orderable type work and no value is ever re-encoded on our side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from airflow_cdc.engine.signals.signal import WINDOW_CLOSE, WINDOW_OPEN
from airflow_cdc.engine.snapshots.chunks import TablePlan
from airflow_cdc.engine.sources.postgres.changes import WATERMARK_PREFIX

Bound = tuple[str, ...]


@dataclass(frozen=True)
class ChunkKey:
    """The columns a table is chunked by (its primary key, or a surrogate key)."""

    columns: tuple[str, ...]
    types: tuple[str, ...]  # format_type() of each, for the casts of the bounds


def where(plan: TablePlan, key: ChunkKey, after: Bound | None = None, upto: Bound | None = None) -> sql.Composable:
    """``where [key > after] [and key <= upto] [and (filter)]``. The bounds are the server's
    text of each key column, as literals cast to the column's type."""
    parts: list[sql.Composable] = []
    if after is not None or upto is not None:
        row = sql.SQL(", ").join(sql.Identifier(c) for c in key.columns)
        for bound, operator in ((after, ">"), (upto, "<=")):
            if bound is not None:
                values = sql.SQL(", ").join(
                    sql.SQL("{}::" + t).format(sql.Literal(v)) for v, t in zip(bound, key.types, strict=True)
                )
                parts.append(sql.SQL("({}) " + operator + " ({})").format(row, values))
    if plan.filter:
        parts.append(sql.SQL("({})").format(sql.SQL(plan.filter)))
    if not parts:
        return sql.SQL("")
    return sql.SQL(" where ") + sql.SQL(" and ").join(parts)


def max_key_query(table: sql.Composable, key: ChunkKey, where: sql.Composable) -> sql.Composed:
    """The table's greatest key, as text."""
    columns = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in key.columns)
    # Qualified: an unqualified name in ORDER BY would sort by the text output column.
    order = sql.SQL(", ").join(sql.SQL("{}.{} desc").format(table, sql.Identifier(c)) for c in key.columns)
    return sql.SQL("select {} from {}{} order by {} limit 1").format(columns, table, where, order)


def range_query(
    table: sql.Composable,
    captured: Sequence[sql.Composable],
    key: ChunkKey,
    where: sql.Composable,
    limit: int | None,
) -> sql.Composed:
    """The ``captured`` expressions of the rows ``where`` selects, in key order (at most
    ``limit``), each followed by its key's text."""
    keys = sql.SQL(", ").join(
        sql.SQL("{}::text as {}").format(sql.Identifier(c), sql.Identifier(f"__cdc_key_{i}"))
        for i, c in enumerate(key.columns)
    )
    order = sql.SQL(", ").join(sql.SQL("{}.{}").format(table, sql.Identifier(c)) for c in key.columns)
    return sql.SQL("select {}, {} from {}{} order by {}{}").format(
        sql.SQL(", ").join(captured),
        keys,
        table,
        where,
        order,
        sql.SQL("") if limit is None else sql.SQL(" limit {}").format(sql.Literal(limit)),
    )


def boundaries_query(
    table: sql.Composable, key: ChunkKey, where: sql.Composable, limit: int, per_reader: int
) -> sql.Composed:
    """Every ``per_reader``-th key (as text, then its row number) of the first ``limit`` rows
    ``where`` selects: where the window's readers split it (one index scan)."""
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in key.columns)
    texts = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in key.columns)
    order = sql.SQL(", ").join(sql.SQL("{}.{}").format(table, sql.Identifier(c)) for c in key.columns)
    return sql.SQL(
        "select * from (select {texts}, row_number() over (order by {columns}) as n from "
        "(select {columns} from {table}{where} order by {order} limit {limit}) keys) numbered "
        "where mod(n, {per}) = 0"
    ).format(
        texts=texts,
        order=order,
        columns=columns,
        table=table,
        where=where,
        limit=sql.Literal(limit),
        per=sql.Literal(per_reader),
    )


def watermark_statements(
    window_id: str, kind: str, data: str, *, signal: tuple[str, str] | None, strategy: str, read_only: bool
) -> sql.Composed:
    """The statements that write a watermark, in a transaction of their own (``data``: the
    row's metadata, see :mod:`airflow_cdc.engine.signals.watermark`): a row of the signal table,
    or - read-only, or without one - a WAL message."""
    if read_only or signal is None:
        write = sql.SQL("select pg_logical_emit_message(true, {}, {})").format(
            sql.Literal(WATERMARK_PREFIX), sql.Literal(f"{kind}:{window_id}")
        )
    elif kind == "close" and strategy == "insert_delete":
        write = sql.SQL("delete from {} where id = {}").format(
            sql.Identifier(*signal), sql.Literal(f"{window_id}-open")
        )
    else:
        write = sql.SQL("insert into {} (id, type, data) values ({}, {}, {})").format(
            sql.Identifier(*signal),
            sql.Literal(f"{window_id}-{kind}"),
            sql.Literal(WINDOW_OPEN if kind == "open" else WINDOW_CLOSE),
            sql.Literal(data),
        )
    return sql.SQL("begin; {}; commit").format(write)
