"""What applying to a SQL target raises: ``CdcError`` subclasses whose messages say what to fix."""

from __future__ import annotations

from airflow_cdc.engine.errors import CdcError


class TargetError(CdcError):
    """Applying changes to a SQL target failed; the message says what to fix."""


class TargetSchemaError(TargetError):
    """The target table is missing, or lacks a column, its key constraint or the position
    column; the message gives SQL that fixes it."""


class TargetWriteError(TargetError):
    """The target refused a value (a type or mode mismatch between source and target)."""


class TargetPrivilegeError(TargetError):
    """The target's user may not do what applying changes needs; the message gives the GRANT."""
