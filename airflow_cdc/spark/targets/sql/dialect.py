"""What differs between SQL targets, behind one interface: connecting, reading the catalog, and
the upsert / delete / TRUNCATE statements (each dialect builds and runs its own, under the
position guard ``apply.py`` describes); plus the SQL and messages every dialect shares.

:func:`dialect_for` picks the dialect by the URL's scheme: ``postgres.py`` (psycopg 3) or
``mysql.py`` (PyMySQL, MariaDB-compatible SQL).
"""

from __future__ import annotations

from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets.sql.errors import TargetError, TargetPrivilegeError, TargetSchemaError
from airflow_cdc.spark.targets.sql.settings import safe_url
from airflow_cdc.spark.targets.sql.tables import Table, TableInfo, TableName


class Dialect:
    """What differs between PostgreSQL and MySQL: connecting, the catalog, the statements."""

    #: ``postgresql`` or ``mysql`` (MariaDB too): which type mapping creates its tables.
    name = ""
    counts_skipped = False
    #: Whether :meth:`upsert_staged` and :meth:`delete_staged` (COPY into a staging table) exist.
    copies = False

    def connect(self, url: str) -> Any:
        raise NotImplementedError

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        raise NotImplementedError

    def transient(self, exc: BaseException) -> bool:
        """Whether the target refused the transaction for a reason that passes when it is run
        again: a deadlock (two lanes' transactions, or another writer), a serialization failure."""
        return False

    def identity(self, conn: Any, name: TableName) -> Any:
        """What changes when the table is dropped and recreated or altered (``TableInfo.identity``);
        None when it no longer exists. One catalog lookup: each call checks its cached tables."""
        raise NotImplementedError

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        raise NotImplementedError

    def upsert(self, conn: Any, table: Table, columns: tuple[str, ...], params: list[tuple[Any, ...]]) -> int:
        raise NotImplementedError

    def delete(self, conn: Any, table: Table, params: list[tuple[Any, ...]]) -> int:
        raise NotImplementedError

    def truncate(self, conn: Any, table: Table, position: str) -> int:
        raise NotImplementedError

    def upsert_staged(self, conn: Any, table: Table, columns: tuple[str, ...], params: list[tuple[Any, ...]]) -> int:
        raise NotImplementedError

    def delete_staged(self, conn: Any, table: Table, params: list[tuple[Any, ...]]) -> int:
        raise NotImplementedError

    def identifier(self, name: str) -> str:
        raise NotImplementedError

    position_definition = ""

    def quote(self, name: TableName) -> str:
        return ".".join(self.identifier(part) for part in (name.schema, name.name) if part)

    def add_position_sql(self, name: TableName) -> str:
        return f"ALTER TABLE {self.quote(name)} ADD COLUMN IF NOT EXISTS {self.position_definition}"

    # --- the driver's check before the stream starts ------------------------------------

    def check_writable(self, conn: Any, table: Table) -> None:
        """Refuse a table the job cannot write: no unique key at all (every upsert needs one on
        the event key's columns, which are known only once changes are read), or a privilege
        missing. Each probe is a statement that touches no row: the server checks its
        privileges before it runs, so a refusal here is the one the first batch would meet."""
        if not table.info.unique_keys:
            raise TargetSchemaError(
                f"Target table {table.name} (source {table.source}) has no primary key or unique index, and "
                f"upserts need one on the change events' key columns: ALTER TABLE {self.quote(table.name)} "
                f"ADD PRIMARY KEY (<the source's key columns>)"
            )
        for needed, grant, statement in self.write_probes(table):
            refusal = self.refusal(conn, statement)
            if refusal is not None:
                raise TargetPrivilegeError(
                    f"The target's user may not {needed} on {table.name} (source {table.source}), which applying "
                    f"changes needs: {refusal}. Grant it: {grant}"
                )

    def write_probes(self, table: Table) -> list[tuple[str, str, str]]:
        """(what is needed, the GRANT that gives it, a statement that needs it and changes nothing)."""
        t, p = self.quote(table.name), self.identifier(POSITION_COLUMN)
        grant = f"GRANT SELECT, INSERT, UPDATE, DELETE ON {t} TO <the job's user>"
        return [
            ("SELECT and INSERT", grant, f"INSERT INTO {t} ({p}) SELECT {p} FROM {t} WHERE 1 = 0"),
            ("UPDATE", grant, f"UPDATE {t} SET {p} = {p} WHERE 1 = 0"),
            ("DELETE", grant, f"DELETE FROM {t} WHERE 1 = 0"),
        ]

    def refusal(self, conn: Any, statement: str) -> str | None:
        """Run ``statement``; the server's words if it refused it for a missing privilege."""
        raise NotImplementedError

    # --- messages ----------------------------------------------------------------------

    def missing_table_message(self, source: str, target: TableName) -> str:
        return (
            f"Target table {target} (for source table {source}) does not exist. Create it with the source's columns "
            f"and types, a primary key on the source's key columns and the position column: CREATE TABLE "
            f"{self.quote(target)} (<the source's columns>, {self.position_definition}, PRIMARY KEY (<key columns>)); "
            f"or map the source table to an existing one (settings.tables). The job creates it itself when the "
            f"changes carry their schemas (key.converter.schemas.enable=true and value.converter.schemas.enable=true "
            f"on the connector) and the schema change policy is not 'exception'"
        )

    def missing_key_message(self, table: Table, key: tuple[str, ...]) -> str:
        columns = ", ".join(self.identifier(c) for c in key)
        return (
            f"Target table {table.name} (source {table.source}) has no primary key or unique index on exactly "
            f"({', '.join(key)}), the change events' key columns, which upserts need: "
            f"ALTER TABLE {self.quote(table.name)} ADD PRIMARY KEY ({columns})"
        )

    def missing_columns_message(self, table: Table, missing: list[str], what: str) -> str:
        adds = "; ".join(
            f"ALTER TABLE {self.quote(table.name)} ADD COLUMN {self.identifier(c)} <the source's type>" for c in missing
        )
        return (
            f"Target table {table.name} (source {table.source}) lacks the {what}column(s) {', '.join(missing)} "
            f"that the change events carry: {adds}. Or let the job add them: with the changes' schemas "
            f"(value.converter.schemas.enable=true on the connector) the 'lenient' and 'evolve' schema change "
            f"policies do"
        )

    def left_out_message(self, table: Table, column: str | None, detail: str) -> str:
        return (
            f"A change of a key that target table {table.name} (source {table.source}) does not have leaves column "
            f"{column} out - an unchanged TOASTed value, which the source did not send - and the target refuses "
            f"its default ({detail}). The value cannot be invented here: set REPLICA IDENTITY FULL on the source "
            f"table (the connector then sends the old value), or let {column} take NULL or a default on the target"
        )

    def refused_message(self, table: Table, column: str | None, detail: str) -> str:
        where = f" column {column} of" if column else ""
        return (
            f"The target refused a value for{where} {table.name} (source {table.source}): {detail}. The target "
            f"column's type must match the source column's, and the settings' modes the connector's "
            f"(decimal.handling.mode, binary.handling.mode, time.precision.mode, interval.handling.mode)"
        )


def dialect_for(url: str) -> Dialect:
    """The dialect for a target URL's scheme (``postgresql+psycopg://`` counts as ``postgresql``)."""
    # The dialects are imported here because their modules import this one.
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        from airflow_cdc.spark.targets.sql.postgres import POSTGRES

        return POSTGRES
    if scheme in ("mysql", "mariadb"):
        from airflow_cdc.spark.targets.sql.mysql import MYSQL

        return MYSQL
    raise TargetError(f"unknown SQL target {safe_url(url)!r}: use postgresql://... or mysql://...")
