"""Check the apply job's target from the task, before Spark starts.

Why: the job meets its target only when a batch reaches it, after Spark's start-up (half a
minute or more), and a wrong password then fails inside kilobytes of JVM traces; a run with
nothing to apply does not meet it at all. These checks take milliseconds and put the cause first.

The rule is the job's own, not a second one. A SQL target is reached at the same URL (so with
the same credentials) and checked by ``sql.check_target``, the job's code: the target table of
every named source table must exist (the job never creates one), and one that lacks
``_cdc_position`` gets it, as the job's first batch would add it; each must have a unique key and
let the job's user write it. Only the tables the caller names are checked here; the job itself
checks again on its driver before its stream starts (``check_job_target``), adding the tables its
topics name. A Delta/Parquet
target on a local path needs its root, or the nearest directory above it that exists, writable
(on a local master only: on a cluster the executors write it).

Failures are typed: :class:`TargetRefused` when a retry would fail the same (credentials, a
missing database or table, a permission) and :class:`TargetUnreachable` when it may not (nothing
answers, a timeout). Each message's first line is ``<label>: <the server's own words>``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.spark.targets import LAKE_SCHEMES, SQL_SCHEMES, scheme_of

log = logging.getLogger(__name__)

__all__ = ["TargetRefused", "TargetUnreachable", "check_before_start", "check_job_target"]

#: libpq's words for refusals a retry does not cure (it gives no SQLSTATE for a failed connect).
_PG_REFUSALS = (
    "password authentication failed",
    "authentication failed",
    "password supplied",
    "does not exist",  # the database or the role
    "no pg_hba.conf entry",
    "permission denied",
    "not permitted to log in",
)
#: SQLSTATE classes of refusals: invalid authorization, invalid catalog name, access rule violation.
_PG_REFUSED_CLASSES = ("28", "3D", "42")
#: Access denied (to the server, to a database, to a command), unknown database, host not allowed.
_MYSQL_REFUSALS = frozenset((1044, 1045, 1049, 1130, 1142, 1251, 1698))


class TargetRefused(CdcError):
    """The target refuses the job (credentials, database, table, permission): fix, then rerun."""


class TargetUnreachable(RetriableError):
    """The target did not answer (or not in time), or failed in a way a retry may cure."""


def check_before_start(
    url: str,
    label: str,
    tables: Iterable[str] = (),
    table_map: Mapping[str, str] | None = None,
    *,
    writes_here: bool = True,
    timeout: int = 10,
    creates: bool = False,
) -> None:
    """Check what the job will write to; raises TargetRefused or TargetUnreachable.
    ``writes_here``: the executors run on this machine (a local master). Else a lake path is
    theirs to reach, and this machine may not see it (nor need to): it is not checked.
    ``creates``: the job creates missing tables (its schema change policy), so only the
    tables that exist are checked."""
    scheme = scheme_of(url)
    if scheme in SQL_SCHEMES and creates and tables:
        tables = [t for t in tables if t not in set(_missing_tables(url, label, list(tables), table_map or {}))]
    if scheme in SQL_SCHEMES:
        _check_sql(url, label, list(tables), dict(table_map or {}), timeout)
    elif scheme in LAKE_SCHEMES and writes_here:
        _check_lake(url, label)


def check_job_target(
    url: str, topics: Iterable[str], table_map: Mapping[str, str], named: Iterable[str] = (), *, creates: bool = False
) -> None:
    """The apply job's own check, on its driver before the stream starts (so before any record
    is read): every table it will write, named (``table_map``, lane groups: ``named``) or known
    from a topic's name, must have a unique key and let the job's user write it, and a named one
    must exist. A topic's name is only a guess at its table (a routed or renamed topic holds
    another's changes): a guessed table that does not exist is left to the first batch, with a
    warning. Source columns and key columns are known only from the changes: the first batch
    checks those. ``creates``: the schema change policy creates missing tables from the
    changes' schemas, so a named one may be missing too."""
    from airflow_cdc.spark.targets.sql import safe_url

    label = f"target {safe_url(url)}"
    tables = list(dict.fromkeys([*table_map, *named]))
    guessed = [t for t in dict.fromkeys(filter(None, map(source_table_of, topics))) if t not in tables]
    if creates:
        guessed, tables = [*tables, *guessed], []
    if guessed and scheme_of(url) in SQL_SCHEMES:
        missing = _missing_tables(url, label, guessed, table_map)
        for table in missing:
            log.warning(
                "%s: no table for %s yet; the first batch creates it from the changes' schemas, if they carry them",
                label,
                table,
            )
        tables += [t for t in guessed if t not in missing]
    check_before_start(url, label, tables, table_map, writes_here=False)


def _missing_tables(url: str, label: str, tables: list[str], table_map: Mapping[str, str]) -> list[str]:
    from airflow_cdc.spark.targets.sql import TableName, dialect_for

    dialect = dialect_for(url)
    try:
        conn = dialect.connect(url)
    except _driver_errors() as exc:
        raise _classified(exc, label) from exc
    try:
        return [t for t in tables if dialect.read_table(conn, TableName.parse(table_map.get(t, t))) is None]
    except _driver_errors() as exc:
        raise _classified(exc, label) from exc
    finally:
        conn.close()


def source_table_of(topic: str) -> str | None:
    """The source table of a Debezium topic, ``<topic.prefix>.<schema or database>.<table>``, as
    the changes name it (``schema.table``); None for a name of another shape (a routed topic)."""
    parts = topic.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 3 else None


def _check_sql(url: str, label: str, tables: list[str], table_map: dict[str, str], timeout: int) -> None:
    from airflow_cdc.spark.targets.sql import SqlTargetSettings, TargetError, check_target

    _connect(url, label, timeout).close()  # with a timeout, which the job's own connect lacks
    if not tables:
        return
    try:
        check_target(SqlTargetSettings(url=url, tables=table_map), tables)
    except TargetError as exc:
        raise TargetRefused(f"{label}: {exc}") from exc
    except _driver_errors() as exc:
        raise _classified(exc, label) from exc


def _connect(url: str, label: str, timeout: int) -> Any:
    try:
        if scheme_of(url) == "mysql":
            from airflow_cdc.spark.targets.sql import mysql_params as _mysql_params  # the job's reading of the URL

            return mysql_client.connect(**_mysql_params(url), connect_timeout=timeout)
        import psycopg

        rest = url.split(":", 1)[1]  # as the job's dialect: postgres:// is libpq's postgresql://
        return psycopg.connect(
            "postgresql:" + rest, connect_timeout=max(2, timeout), application_name="airflow-cdc-preflight"
        )
    except _driver_errors() as exc:
        raise _classified(exc, label) from exc


def _driver_errors() -> tuple[type[Exception], ...]:
    import psycopg
    import pymysql

    return (psycopg.Error, pymysql.MySQLError)


def _classified(exc: Exception, label: str) -> CdcError:
    """A driver's error as TargetRefused or TargetUnreachable, its cause first."""
    import pymysql

    if isinstance(exc, pymysql.MySQLError):
        code = exc.args[0] if exc.args else None
        message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        refused = code in _MYSQL_REFUSALS
    else:
        message = _pg_cause(str(exc))
        sqlstate = str(getattr(exc, "sqlstate", None) or "")
        refused = sqlstate[:2] in _PG_REFUSED_CLASSES or (
            not sqlstate and any(words in message for words in _PG_REFUSALS)
        )
    kind = TargetRefused if refused else TargetUnreachable
    return kind(f"{label}: {message}")


def _pg_cause(text: str) -> str:
    """libpq's failure without its preamble: ``connection failed: connection to server at …
    failed: FATAL:  password authentication failed …`` → what follows ``FATAL:``."""
    if "FATAL:" in text:
        text = text.rsplit("FATAL:", 1)[1]
    text = text.removeprefix("connection failed: ").strip()
    return text.splitlines()[0].strip() if text else "unknown error"


def _check_lake(url: str, label: str) -> None:
    root = url.split(":", 1)[1].removeprefix("//")  # as LakeTarget reads it
    if "://" in root or root.startswith("catalog="):
        return  # remote storage or an Iceberg catalog: the executors' credentials decide, not this worker's
    existing = Path(root).absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise TargetRefused(f"{label}: {existing} is not a directory, so {root} cannot be one")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TargetRefused(f"{label}: {existing} is not writable by this user (uid {os.getuid()})")
