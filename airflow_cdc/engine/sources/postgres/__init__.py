"""PostgreSQL source: pgoutput logical decoding over psycopg 3."""

from airflow_cdc.engine.sources.postgres import compiled

# Before any hot module is imported: the compiled ones when a current build exists (ADR 0033).
compiled.install()
