"""Snapshots taken while streaming: DBLog incremental snapshots (seed 001)."""

from airflow_cdc.engine.snapshots.incremental import ChunkSource, IncrementalSnapshot, SnapshotContext, TablePlan

__all__ = ["ChunkSource", "IncrementalSnapshot", "SnapshotContext", "TablePlan"]
