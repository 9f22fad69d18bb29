"""Operators of airflow-cdc: start and stop engine instances, snapshots, offsets, bounded capture."""
