"""What a target table is: its name and its catalog entry (read once per process), and, within
one apply call, its decoders, key, parameter plans and built statements."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.values import ColumnType, Decoder, Modes, decoder_for, pass_through


@dataclass(frozen=True)
class TableName:
    schema: str | None
    name: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        schema, dot, name = text.partition(".")
        return cls(schema, name) if dot else cls(None, text)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


@dataclass(frozen=True)
class TableInfo:
    """A target table as its catalog describes it."""

    name: TableName  # schema resolved
    columns: dict[str, ColumnType]
    unique_keys: tuple[frozenset[str], ...]
    #: What tells this table from one recreated under its name, or altered (``Dialect.identity``).
    identity: Any = None

    @property
    def has_position(self) -> bool:
        return POSITION_COLUMN in self.columns


#: (url, target table) -> TableInfo: read once per process (an executor's Python worker), and
#: checked by its identity (one cheap query) when an apply call first uses the table.
CATALOG: dict[tuple[str, str], TableInfo] = {}


def clear_catalog_cache() -> None:
    """Forget every table read from a catalog (they are read again on next use)."""
    CATALOG.clear()


class Plan:
    """How one column set of one table becomes statement parameters: the values in
    ``columns`` order, through the decoders that do something, then the position."""

    def __init__(self, columns: tuple[str, ...], decoders: list[Decoder], fill: bool = False) -> None:
        self.columns = columns
        getter = itemgetter(*columns)
        self.values: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            getter if len(columns) > 1 else lambda after: (getter(after),)
        )
        if fill:  # some columns are not in the change (``evolve``: dropped at the source): NULL
            self.values = lambda after: tuple(after.get(c) for c in columns)
        self.steps = [(i, d) for i, d in enumerate(decoders) if d is not pass_through]

    def params(self, after: Mapping[str, Any], position: str) -> tuple[Any, ...]:
        values = [*self.values(after), position]
        for index, decode in self.steps:
            values[index] = decode(values[index])
        # A tuple of strings leaves the garbage collector's view at its first collection; a
        # segment's thousands of lists would instead make every full collection longer.
        return tuple(values)


class Table:
    """One target table within one call: its catalog, decoders, key, plans and statements."""

    def __init__(self, source: str, cache_key: tuple[str, str], info: TableInfo, modes: Modes) -> None:
        self.source, self.cache_key, self.info, self.modes = source, cache_key, info, modes
        self.decoders: dict[Any, Decoder] = {}
        self.key: tuple[str, ...] | None = None
        self.plans: dict[tuple[tuple[str, ...], str | None], Plan] = {}
        self.statements: dict[Any, Any] = {}
        #: Staging tables created in this call's transaction (dropped at its commit).
        self.stages: set[str] = set()

    @property
    def name(self) -> TableName:
        return self.info.name

    def decoder(self, column: str, encoding: tuple[str, int] | None = None) -> Decoder:
        """``column``'s decoder; by ``encoding`` (the scale or temporal precision of the schema a
        value was written with, ``table_schemas.encodings``) where the change's schema gave one."""
        cached = column if encoding is None else (column, encoding)
        decode = self.decoders.get(cached)
        if decode is None:
            kind = self.info.columns[column]
            if encoding is not None:
                what, value = encoding
                kind = replace(kind, scale=value) if what == "scale" else replace(kind, precision=value)
            decode = self.decoders[cached] = decoder_for(kind, self.modes)
        return decode

    def forget_types(self) -> None:
        self.decoders.clear()
        self.plans.clear()
        self.statements.clear()
