"""Which captured tables a signal's ``data-collections`` name: regexes matched against whole
``schema.table`` names (Debezium's rule), or, with a qualifier, ``<qualifier>.schema.table``."""

from __future__ import annotations

import re

from airflow_cdc.engine.signals.signal import Signal, SignalError


def matches(pattern: str, table: str, qualifier: str | None = None) -> bool:
    """A ``data-collections`` regex names the table (``schema.table``, whole), or, with a
    qualifier, ``<qualifier>.schema.table``."""
    return re.fullmatch(pattern, table) is not None or (
        qualifier is not None and re.fullmatch(pattern, f"{qualifier}.{table}") is not None
    )


def match_tables(known: list[str], signal: Signal, qualifier: str | None = None) -> list[str]:
    """The captured tables the signal's ``data-collections`` regexes match (whole names)."""
    tables = [t for t in known if any(matches(p, t, qualifier) for p in signal.data_collections)]
    if not tables:
        raise SignalError(
            f"signal {signal.id!r}: no captured table matches {signal.data_collections} "
            f"(captured: {', '.join(known) or 'none'})",
            signal.id,
        )
    return tables
