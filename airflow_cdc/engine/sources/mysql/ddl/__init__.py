"""The one reader of MySQL/MariaDB DDL, without a server, and the two models of a table it feeds.

- ``tokens.py``: the scanner (quoted literals, parentheses, names, comments, tokens).
- ``statements.py``: which statement it is, a CREATE TABLE's body, a column's declared type.
- ``clauses.py``: an ALTER TABLE's clauses.
- ``history_tables.py`` (with ``information_schema.py``): the schema history's tables, columns as
  information_schema describes them, and :func:`apply`, what a statement does to them.
- ``table_changes.py`` (with ``debezium_columns.py``): Debezium's tables, for ``tableChanges``.

This package's own names are the schema history's (``ddl.apply``, ``ddl.Table``): understood are
``CREATE TABLE`` (a column list), ``ALTER TABLE`` (column, key, rename and option clauses, ``FIRST``
/ ``AFTER``), ``RENAME TABLE a TO b`` and ``DROP TABLE``; anything else touching a table returns
``Unknown``, and the caller reads that table from the server instead.
"""

from __future__ import annotations

from airflow_cdc.engine.sources.mysql.ddl.history_tables import Changes, Table, Unknown, apply
from airflow_cdc.engine.sources.mysql.ddl.tokens import split_name, split_top_level, strip_comments, unquote

__all__ = ["Changes", "Table", "Unknown", "apply", "split_name", "split_top_level", "strip_comments", "unquote"]
