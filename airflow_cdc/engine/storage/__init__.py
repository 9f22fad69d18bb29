"""Offset stores, chosen by ``offset.storage``."""

from airflow_cdc.engine.storage.base import OffsetReader, OffsetStore, connect_key
from airflow_cdc.engine.storage.file import FileOffsetStore
from airflow_cdc.engine.storage.memory import MemoryOffsetStore

OFFSET_STORAGE_ALIASES = {
    "org.apache.kafka.connect.storage.FileOffsetBackingStore": "file",
    "org.apache.kafka.connect.storage.MemoryOffsetBackingStore": "memory",
}

__all__ = [
    "OFFSET_STORAGE_ALIASES",
    "FileOffsetStore",
    "MemoryOffsetStore",
    "OffsetReader",
    "OffsetStore",
    "connect_key",
]
