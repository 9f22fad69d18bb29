"""Snapshots taken while streaming: DBLog incremental snapshots (seed 001), and the coordinator
that drives them and the signals from a source's stream of typed events."""

from airflow_cdc.engine.snapshots.chunks import Chunk, ChunkSource, ReadVisibility, TablePlan, TableReadError
from airflow_cdc.engine.snapshots.events import SignalRow, SourceEvent, Watermark
from airflow_cdc.engine.snapshots.incremental import IncrementalSnapshot, SnapshotContext

__all__ = [
    "Chunk",
    "ChunkSource",
    "IncrementalSnapshot",
    "ReadVisibility",
    "SignalRow",
    "SnapshotContext",
    "SourceEvent",
    "TablePlan",
    "TableReadError",
    "Watermark",
]
