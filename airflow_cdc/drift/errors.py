"""What the drift check raises: a :class:`~airflow_cdc.engine.errors.CdcError`, as everything else."""

from __future__ import annotations

from airflow_cdc.engine.errors import CdcError


class DriftError(CdcError):
    """The tables cannot be compared as asked (no primary key, a key the check cannot range
    over, a column the target lacks, a server that writes no log)."""
