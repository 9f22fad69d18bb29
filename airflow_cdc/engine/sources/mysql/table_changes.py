"""Debezium's tables for ``tableChanges``: kept at this path for its callers; the model lives in
``ddl/table_changes.py``, beside the schema history's, both fed by the one DDL reader in ``ddl/``."""

from __future__ import annotations

from airflow_cdc.engine.sources.mysql.ddl.table_changes import Column, Table, alter, column, create_table

__all__ = ["Column", "Table", "alter", "column", "create_table"]
