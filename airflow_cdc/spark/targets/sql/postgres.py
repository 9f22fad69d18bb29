"""The PostgreSQL dialect (psycopg 3): multi-row statements with the server's own ``$n``
placeholders, built once per table, column set and row count, and chunked under the protocol's
limit of parameters per statement; and for large groups, COPY into a staging table then one
set-based statement.

The staging path (PeerDB's method): a temporary table with exactly the group's columns and the
target's column types (``CREATE TEMP TABLE ... AS SELECT ... WITH NO DATA``: no NOT NULL, no
defaults, so a column left out stays out), created once per call and table and column set,
``ON COMMIT DROP`` (the connection lives for one call, so a table kept for the session would
never be reused), emptied by TRUNCATE between segments. COPY is in text format: the values are
already the columns' text forms (``values/postgres.py``), which the server parses as it does a
statement's parameters; binary would need each type's binary encoding.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets.sql.dialect import Dialect
from airflow_cdc.spark.targets.sql.errors import TargetError, TargetWriteError
from airflow_cdc.spark.targets.sql.tables import Table, TableInfo, TableName
from airflow_cdc.spark.values import ColumnType

_POSTGRES_PARAMETERS = 65535  # the protocol's limit per statement

_PG_TABLE = """
select c.oid, n.nspname, c.relname, c.xmin::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = coalesce(%s::text, current_schema()) and c.relname = %s and c.relkind in ('r', 'p', 'f')
"""
#: The identity (``Dialect.identity``): a recreated table has another OID, and ALTER TABLE (a
#: column added, retyped, dropped) writes a new version of its pg_class row (another xmin). An
#: index may come and go without either: a change whose key is not among the cached unique keys
#: reads the table again (``apply.py``), and a failed call forgets what it read.
#: Each column's type with domains resolved (information_schema's own helpers), an array's
#: element type, and the scale / fractional digits / bit length its typmod gives.
_PG_COLUMNS = """
select a.attname, format_type(a.atttypid, a.atttypmod), coalesce(et.typname, bt.typname),
       coalesce(et.typtype, bt.typtype) = 'e', et.oid is not null,
       information_schema._pg_numeric_scale(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_datetime_precision(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_char_max_length(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_interval_type(coalesce(et.oid, bt.oid), r.typmod)
from pg_attribute a
join pg_type t on t.oid = a.atttypid
cross join lateral (
    select information_schema._pg_truetypid(a.*, t.*) as typid, information_schema._pg_truetypmod(a.*, t.*) as typmod
) r
join pg_type bt on bt.oid = r.typid
left join pg_type et on bt.typcategory = 'A' and bt.typelem <> 0 and et.oid = bt.typelem
where a.attrelid = %s and a.attnum > 0 and not a.attisdropped
order by a.attnum
"""
#: Unique indexes ON CONFLICT can infer: no predicate, no expression.
_PG_UNIQUE = """
select array(
    select a.attname::text from unnest(i.indkey) k join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k
)
from pg_index i where i.indrelid = %s and i.indisunique and i.indisvalid and i.indpred is null and i.indexprs is null
"""
_PG_PARAMETER = re.compile(r"parameter \$(\d+)")
_PG_COPY_COLUMN = re.compile(r"^COPY [^,]+, line \d+, column (.+?): ", re.MULTILINE)


class PostgresDialect(Dialect):
    name = "postgresql"
    counts_skipped = True
    copies = True
    position_definition = f'{POSITION_COLUMN} varchar(64) COLLATE "C"'

    def connect(self, url: str) -> Any:
        import psycopg

        rest = url.split(":", 1)[1]  # postgres:// and postgresql+psycopg:// are libpq's postgresql://
        return psycopg.connect("postgresql:" + rest, autocommit=False, application_name="airflow-cdc-apply")

    def identifier(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        found = conn.execute(_PG_TABLE, (target.schema, target.name)).fetchone()
        if found is None:
            return None
        oid, schema, name, version = found
        qualified = f"{schema}.{name}"
        columns = {}
        for column, sql_type, type_name, enum, array, scale, precision, length, fields in conn.execute(
            _PG_COLUMNS, (oid,)
        ):
            columns[column] = ColumnType(
                qualified, column, type_name, sql_type, scale, precision, length, array, enum, interval_fields=fields
            )
        keys = tuple(frozenset(row[0]) for row in conn.execute(_PG_UNIQUE, (oid,)))
        return TableInfo(TableName(schema, name), columns, keys, (oid, version))

    def transient(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure)

    def identity(self, conn: Any, name: TableName) -> Any:
        found = conn.execute(_PG_TABLE, (name.schema, name.name)).fetchone()
        return None if found is None else (found[0], found[3])

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        # In the call's transaction: PostgreSQL's DDL is transactional, and the table's lock is
        # then the transaction's (a deadlock with another executor is detected, not hung).
        conn.execute(statement)

    def write_probes(self, table: Table) -> list[tuple[str, str, str]]:
        # Large groups go through a temporary staging table (the COPY path).
        stage = f"CREATE TEMP TABLE _cdc_probe ON COMMIT DROP AS SELECT * FROM {self.quote(table.name)} WITH NO DATA"
        grant = "GRANT TEMPORARY ON DATABASE <the target database> TO <the job's user>"
        return [*super().write_probes(table), ("create temporary tables", grant, stage)]

    def refusal(self, conn: Any, statement: str) -> str | None:
        import psycopg

        try:
            conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege as exc:
            conn.rollback()
            return _first_line(exc)
        return None

    def upsert(self, conn: Any, table: Table, columns: tuple[str, ...], params: list[tuple[Any, ...]]) -> int:
        if _partial(table, columns):  # through a staging table, whose columns have the target's types
            return self.upsert_staged(conn, table, columns, params)
        width = len(columns) + 1
        applied = 0
        with self._cursor(conn) as cur:
            for chunk in _chunks(params, max(1, _POSTGRES_PARAMETERS // width)):
                query = self._statement(conn, table, ("upsert", columns, len(chunk)))
                applied += self._run(cur, table, query, [v for row in chunk for v in row], (*columns, POSITION_COLUMN))
        return applied

    def delete(self, conn: Any, table: Table, params: list[tuple[Any, ...]]) -> int:
        assert table.key is not None
        deleted = 0
        with self._cursor(conn) as cur:
            for chunk in _chunks(params, max(1, _POSTGRES_PARAMETERS // (len(table.key) + 1))):
                query = self._statement(conn, table, ("delete", len(chunk)))
                names = (*table.key, POSITION_COLUMN)
                deleted += self._run(cur, table, query, [v for row in chunk for v in row], names)
        return deleted

    def truncate(self, conn: Any, table: Table, position: str) -> int:
        with self._cursor(conn) as cur:
            return self._run(cur, table, self._statement(conn, table, ("truncate",)), [position], (POSITION_COLUMN,))

    def upsert_staged(self, conn: Any, table: Table, columns: tuple[str, ...], params: list[tuple[Any, ...]]) -> int:
        names = (*columns, POSITION_COLUMN)
        stage = self._stage(conn, table, names, params)
        with conn.cursor() as cur:
            query = self._statement(conn, table, ("upsert-staged", columns, stage))
            return self._run(cur, table, query, None, names, counted=_partial(table, columns))

    def delete_staged(self, conn: Any, table: Table, params: list[tuple[Any, ...]]) -> int:
        assert table.key is not None
        names = (*table.key, POSITION_COLUMN)
        stage = self._stage(conn, table, names, params)
        with conn.cursor() as cur:
            # Without statistics the planner takes the staging table for a big one and joins it
            # by a scan of the whole target; counted, it probes the key's index.
            cur.execute(f"ANALYZE {self.identifier(stage)}")
            return self._run(cur, table, self._statement(conn, table, ("delete-staged", stage)), None, names)

    def _stage(self, conn: Any, table: Table, names: tuple[str, ...], params: list[tuple[Any, ...]]) -> str:
        """The staging table for ``names`` of ``table``, holding ``params`` (and nothing else)."""
        import psycopg
        from psycopg import sql

        # Unique per source table (two may map to one target), target table and column list.
        digest = hashlib.sha1(repr((table.source, str(table.name), names)).encode()).hexdigest()[:20]
        stage = f"_cdc_stage_{digest}"
        columns = sql.SQL(", ").join(map(sql.Identifier, names))
        with conn.cursor() as cur:
            if stage not in table.stages:
                create = sql.SQL(
                    "CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {columns} FROM {table} WITH NO DATA"
                ).format(stage=sql.Identifier(stage), columns=columns, table=self._table(table))
                try:
                    cur.execute(create)
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise TargetError(
                        f"Applying changes of {table.source} to {table.name} by COPY needs a temporary staging "
                        f"table, which the target's user may not create ({_first_line(exc)}): GRANT TEMPORARY ON "
                        f"DATABASE <the target database> TO <the user>; or set copy_min_rows=None (statements only)"
                    ) from exc
                table.stages.add(stage)
            else:
                cur.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(stage)))
            try:
                with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(stage), columns)) as copy:
                    write = copy.write_row
                    for row in params:
                        write(row)
            except psycopg.errors.DataError as exc:
                match = _PG_COPY_COLUMN.search(exc.diag.context or "")
                raise TargetWriteError(self.refused_message(table, match and match.group(1), _first_line(exc))) from exc
            except psycopg.Error as exc:
                exc.add_note(f"while copying changes of {table.source} to a staging table for {table.name}")
                raise
        return stage

    @staticmethod
    def _cursor(conn: Any) -> Any:
        """A cursor taking the server's own $n placeholders: psycopg caches its conversion of
        %s queries only up to 4 kB, and a multi-row statement is far larger."""
        import psycopg

        return psycopg.RawCursor(conn)

    def _statement(self, conn: Any, table: Table, what: tuple[Any, ...]) -> str:
        query = table.statements.get(what)
        if query is None:
            builders: dict[str, Callable[..., Any]] = {
                "upsert": self._upsert_sql,
                "delete": self._delete_sql,
                "truncate": self._truncate_sql,
                "upsert-staged": self._upsert_staged_sql,
                "delete-staged": self._delete_staged_sql,
            }
            query = table.statements[what] = builders[what[0]](table, *what[1:]).as_string(conn)
        return str(query)

    def _upsert_sql(self, table: Table, columns: tuple[str, ...], rows: int) -> Any:
        from psycopg import sql

        values = sql.SQL("VALUES {}").format(_numbered_rows(rows, ["{}"] * (len(columns) + 1)))
        return self._upsert_from(table, columns, values)

    def _upsert_staged_sql(self, table: Table, columns: tuple[str, ...], stage: str) -> Any:
        from psycopg import sql

        names = sql.SQL(", ").join(map(sql.Identifier, (*columns, POSITION_COLUMN)))
        if _partial(table, columns):
            return self._update_then_insert(table, columns, stage)
        return self._upsert_from(table, columns, sql.SQL("SELECT {} FROM {}").format(names, sql.Identifier(stage)))

    def _update_then_insert(self, table: Table, columns: tuple[str, ...], stage: str) -> Any:
        """The upsert of rows that leave target columns out (an unchanged TOASTed value): INSERT
        ... ON CONFLICT checks the row it would insert against NOT NULL before it looks for the
        conflict, so a NOT NULL column left out failed even for a key the target has. Instead:
        a guarded UPDATE of the keys there, then an INSERT of the keys not there (where a column
        left out takes its default), in one statement; it returns the rows either wrote."""
        from psycopg import sql

        assert table.key is not None
        updated = [c for c in columns if c not in table.key] + [POSITION_COLUMN]
        ident = sql.Identifier
        match = sql.SQL(" AND ").join(sql.SQL("t.{0} = s.{0}").format(ident(c)) for c in table.key)
        return sql.SQL(
            "WITH u AS (UPDATE {table} AS t SET {sets} FROM {stage} AS s WHERE {match} "
            'AND (t.{position} IS NULL OR t.{position} COLLATE "C" <= s.{position}) RETURNING 1), '
            "i AS (INSERT INTO {table} ({names}) SELECT {staged} FROM {stage} AS s "
            "WHERE NOT EXISTS (SELECT 1 FROM {table} AS t WHERE {match}) RETURNING 1) "
            "SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM i)"
        ).format(
            table=self._table(table),
            stage=ident(stage),
            sets=sql.SQL(", ").join(sql.SQL("{0} = s.{0}").format(ident(c)) for c in updated),
            match=match,
            position=ident(POSITION_COLUMN),
            names=sql.SQL(", ").join(map(ident, (*columns, POSITION_COLUMN))),
            staged=sql.SQL(", ").join(sql.SQL("s.{}").format(ident(c)) for c in (*columns, POSITION_COLUMN)),
        )

    def _upsert_from(self, table: Table, columns: tuple[str, ...], rows: Any) -> Any:
        from psycopg import sql

        assert table.key is not None
        updated = [c for c in columns if c not in table.key] + [POSITION_COLUMN]
        return sql.SQL(
            "INSERT INTO {table} AS t ({names}) {rows} ON CONFLICT ({key}) DO UPDATE SET {sets} "
            'WHERE t.{position} IS NULL OR t.{position} COLLATE "C" <= EXCLUDED.{position}'
        ).format(
            table=self._table(table),
            names=sql.SQL(", ").join(map(sql.Identifier, (*columns, POSITION_COLUMN))),
            rows=rows,
            key=sql.SQL(", ").join(map(sql.Identifier, table.key)),
            sets=sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updated),
            position=sql.Identifier(POSITION_COLUMN),
        )

    def _delete_sql(self, table: Table, rows: int) -> Any:
        from psycopg import sql

        assert table.key is not None
        casts = ["{}::" + table.info.columns[c].sql_type.replace("{", "{{").replace("}", "}}") for c in table.key]
        return sql.SQL(
            "DELETE FROM {table} AS t USING (VALUES {rows}) AS d ({names}) WHERE {match} "
            'AND (t.{position} IS NULL OR t.{position} COLLATE "C" <= d.{position})'
        ).format(
            table=self._table(table),
            rows=_numbered_rows(rows, [*casts, "{}::text"]),
            names=sql.SQL(", ").join(map(sql.Identifier, (*table.key, POSITION_COLUMN))),
            match=sql.SQL(" AND ").join(sql.SQL("t.{0} = d.{0}").format(sql.Identifier(c)) for c in table.key),
            position=sql.Identifier(POSITION_COLUMN),
        )

    def _delete_staged_sql(self, table: Table, stage: str) -> Any:
        from psycopg import sql

        assert table.key is not None
        return sql.SQL(
            "DELETE FROM {table} AS t USING {stage} AS d WHERE {match} "
            'AND (t.{position} IS NULL OR t.{position} COLLATE "C" <= d.{position})'
        ).format(
            table=self._table(table),
            stage=sql.Identifier(stage),
            match=sql.SQL(" AND ").join(sql.SQL("t.{0} = d.{0}").format(sql.Identifier(c)) for c in table.key),
            position=sql.Identifier(POSITION_COLUMN),
        )

    def _truncate_sql(self, table: Table) -> Any:
        from psycopg import sql

        return sql.SQL('DELETE FROM {table} WHERE {position} IS NULL OR {position} COLLATE "C" < $1').format(
            table=self._table(table), position=sql.Identifier(POSITION_COLUMN)
        )

    def _table(self, table: Table) -> Any:
        from psycopg import sql

        return sql.Identifier(*(p for p in (table.name.schema, table.name.name) if p))

    def _run(
        self,
        cur: Any,
        table: Table,
        query: str,
        params: list[Any] | None,
        names: tuple[str, ...],
        *,
        counted: bool = False,
    ) -> int:
        """Run ``query``; the rows it changed (``counted``: the number it returns)."""
        import psycopg

        try:
            cur.execute(query, params)
            if counted:
                return int(cur.fetchone()[0])
        except psycopg.errors.NotNullViolation as exc:
            if table.info.columns.keys() - {*names} and exc.diag.column_name not in names:
                raise TargetWriteError(self.left_out_message(table, exc.diag.column_name, _first_line(exc))) from exc
            exc.add_note(f"while applying changes of {table.source} to {table.name}")
            raise
        except psycopg.errors.DataError as exc:
            match = _PG_PARAMETER.search(exc.diag.context or "")
            column = names[(int(match.group(1)) - 1) % len(names)] if match else None
            raise TargetWriteError(self.refused_message(table, column, _first_line(exc))) from exc
        except psycopg.Error as exc:
            exc.add_note(f"while applying changes of {table.source} to {table.name}")
            raise
        return int(cur.rowcount)


def _partial(table: Table, columns: tuple[str, ...]) -> bool:
    """Whether rows of ``columns`` leave some of the target's columns out."""
    return bool(table.info.columns.keys() - {*columns, POSITION_COLUMN})


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _numbered_rows(rows: int, templates: list[str]) -> Any:
    """``($1, $2), ($3, $4), ...``: ``templates`` per row, ``{}`` standing for the parameter."""
    from psycopg import sql

    width, parts = len(templates), []
    for row in range(rows):
        base = row * width
        parts.append("(" + ", ".join(t.format(f"${base + i + 1}") for i, t in enumerate(templates)) + ")")
    return sql.SQL(", ".join(parts))


def _chunks(params: list[tuple[Any, ...]], size: int) -> Iterable[list[tuple[Any, ...]]]:
    for start in range(0, len(params), size):
        yield params[start : start + size]


POSTGRES = PostgresDialect()
