"""The demo's proof: per table, row count and a checksum of the rows on both sides.

Both sides are summarised by the same SQL, not by any code of the pipeline: the md5 of the rows'
text (``row(...)::text``: PostgreSQL's own rendering of each column's type), ordered by the
primary key, over the source table's columns - so the target's ``_cdc_position`` (the apply job's
bookkeeping) is left out. When the checksums differ, the rows are compared one by one to name
the keys that are missing, extra or different.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

#: Keys named per kind of difference in a failure message.
SHOWN_KEYS = 5


@dataclass(frozen=True)
class Summary:
    rows: int
    md5: str


@dataclass(frozen=True)
class TableCheck:
    table: str
    source: Summary
    target: Summary | None
    #: Why the target differs ("" when it does not).
    difference: str = ""

    @property
    def same(self) -> bool:
        return not self.difference


def compare(source_dsn: str, target_dsn: str, tables: Sequence[str]) -> list[TableCheck]:
    """Each of ``tables`` (``schema.table``) in the source database against the same table in
    the target database."""
    checks = []
    with psycopg.connect(source_dsn, autocommit=True) as source, psycopg.connect(target_dsn, autocommit=True) as target:
        for table in tables:
            columns, key = _shape(source, table)
            want = _summary(source, table, columns, key)
            try:
                have = _summary(target, table, columns, key)
            except psycopg.Error as exc:
                checks.append(TableCheck(table, want, None, f"the target table cannot be read: {exc}".strip()))
                continue
            difference = "" if have == want else _differences(source, target, table, columns, key, want, have)
            checks.append(TableCheck(table, want, have, difference))
    return checks


def report(checks: Sequence[TableCheck]) -> list[str]:
    """The report's lines: a header, one line per table."""
    width = max([len(c.table) for c in checks] + [5])
    lines = [f"  {'table':<{width}}  {'source rows':>11}  {'md5':<12}  {'target rows':>11}  {'md5':<12}"]
    for check in checks:
        target = check.target or Summary(-1, "-")
        lines.append(
            f"  {check.table:<{width}}  {check.source.rows:>11}  {check.source.md5[:12]:<12}  "
            f"{target.rows if target.rows >= 0 else '-':>11}  {target.md5[:12]:<12}  "
            + ("same" if check.same else "DIFFERENT")
        )
    return lines


def failure(checks: Sequence[TableCheck]) -> str | None:
    """None when every table matches, else what differs, table by table."""
    differing = [f"{c.table}: {c.difference}" for c in checks if not c.same]
    return "; ".join(differing) or None


# -- SQL ----------------------------------------------------------------------------------------
def _identifier(table: str) -> sql.Identifier:
    return sql.Identifier(*table.split(".", 1))


def _shape(conn: psycopg.Connection[Any], table: str) -> tuple[list[str], list[str]]:
    """The table's columns (in order) and its primary key's columns."""
    columns = [
        str(row[0])
        for row in conn.execute(
            "select attname from pg_attribute where attrelid = %s::regclass and attnum > 0 and not attisdropped "
            "order by attnum",
            (table,),
        )
    ]
    key = [
        str(row[0])
        for row in conn.execute(
            "select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid "
            "and a.attnum = any(i.indkey) where i.indrelid = %s::regclass and i.indisprimary "
            "order by array_position(i.indkey::int2[], a.attnum)",
            (table,),
        )
    ]
    if not key:
        raise ValueError(f"{table} has no primary key: the check orders and matches rows by it")
    return columns, key


def _rows(table: str, columns: list[str], key: list[str]) -> sql.Composed:
    """``select <key as text>, row(<columns>)::text from <table>``."""
    key_text = sql.SQL(" || ',' || ").join(sql.SQL("{}::text").format(sql.Identifier(k)) for k in key)
    return sql.SQL("select {key} as k, row({columns})::text as r from {table}").format(
        key=key_text, columns=sql.SQL(", ").join(map(sql.Identifier, columns)), table=_identifier(table)
    )


def _summary(conn: psycopg.Connection[Any], table: str, columns: list[str], key: list[str]) -> Summary:
    order = sql.SQL(", ").join(sql.Identifier(k) for k in key)
    query = sql.SQL(
        "select count(*), md5(coalesce(string_agg(r, E'\\n' order by {order}), '')) "
        "from (select {key}, row({columns})::text as r from {table}) t"
    ).format(
        order=order,
        key=sql.SQL(", ").join(map(sql.Identifier, key)),
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        table=_identifier(table),
    )
    rows, md5 = conn.execute(query).fetchone()  # type: ignore[misc]
    return Summary(int(rows), str(md5))


def _differences(
    source: psycopg.Connection[Any],
    target: psycopg.Connection[Any],
    table: str,
    columns: list[str],
    key: list[str],
    want: Summary,
    have: Summary,
) -> str:
    query = _rows(table, columns, key)
    expected: dict[str, str] = dict(source.execute(query).fetchall())
    found: dict[str, str] = dict(target.execute(query).fetchall())
    parts = [f"source {want.rows} rows, target {have.rows}"]
    named = ", ".join(key)
    for kind, keys in (
        ("missing in the target", sorted(set(expected) - set(found))),
        ("only in the target", sorted(set(found) - set(expected))),
        ("different", sorted(k for k in expected.keys() & found.keys() if expected[k] != found[k])),
    ):
        if keys:
            more = f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else ""
            shown = ", ".join(keys[:SHOWN_KEYS]) + more
            parts.append(f"{kind}: {named} {shown}")
    if len(parts) == 1:
        parts.append("same rows, different checksum")  # row order or collation: not expected
    return "; ".join(parts)
