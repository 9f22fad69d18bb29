"""The one error hierarchy of the engine.

Retriable versus fatal is a type, not a string: the engine retries :class:`RetriableError`
(with backoff, up to ``errors.max.retries``) and stops on anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload


class CdcError(Exception):
    """Base of every error the engine raises on purpose."""


class RetriableError(CdcError):
    """A transient failure (a lost connection, a broker that is down): worth trying again."""


class ConfigProblem:
    """One problem with one configuration key, and what to do about it."""

    __slots__ = ("fix", "key", "message")

    def __init__(self, key: str, message: str, fix: str) -> None:
        self.key = key
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.key}: {self.message} (fix: {self.fix})"

    def __repr__(self) -> str:
        return f"ConfigProblem({self.key!r}, {self.message!r}, {self.fix!r})"


class ConfigError(CdcError):
    """The configuration is invalid; ``problems`` lists every problem found, not just the first,
    and ``warnings`` what is doubtful besides (unknown keys), so a config is mended in one pass."""

    def __init__(self, problems: Sequence[ConfigProblem], *, warnings: Sequence[ConfigProblem] = ()) -> None:
        self.problems = list(problems)
        self.warnings = list(warnings)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class _StateChange:
    expected: str
    actual: str
    requested: str


class IllegalStateError(CdcError):
    """An engine state transition that the allowed-transitions table forbids."""

    def __init__(self, message: str, *, expected: str, actual: str, requested: str) -> None:
        self.change = _StateChange(expected, actual, requested)
        super().__init__(message)


class RefusedError(CdcError):
    """An operation refused as things stand, e.g. changing the offsets of a running instance."""


class SeekRefusedError(RefusedError):
    """A seek to a position the source server has not reached, or whose server cannot be asked
    (``offsets_admin.check_not_ahead``); not a running instance: stopping it does not help."""


class OffsetError(CdcError):
    """Offsets were misused: a record marked twice, an unknown record, a corrupt offset file."""


class DecodeError(CdcError):
    """Bytes a source read do not decode: a pgoutput or replication message, a binlog row
    image. ``column`` names the column whose value did not decode (None: the message's or the
    row's framing), ``reason`` says what is wrong. Fatal: the same bytes are read again on a
    retry."""

    @overload
    def __init__(self, reason: str, /) -> None: ...
    @overload
    def __init__(self, column: str | None, reason: str, /) -> None: ...
    def __init__(self, *args: str | None) -> None:
        # Two forms: DecodeError(reason) for a whole message, DecodeError(column, reason) for a
        # row's value (the MySQL row decoder's, whose column may be None: the row's framing).
        column, reason = (None, args[0]) if len(args) == 1 else args
        self.column, self.reason = column, str(reason)
        super().__init__(f"column {column}: {reason}" if column else reason)


class SerializationError(CdcError):
    """A record could not be turned into bytes."""


class TransformError(CdcError):
    """A transform failed on a record or was configured wrongly."""


class TaskError(CdcError):
    """A source task failed; ``task_id`` says which."""

    def __init__(self, message: str, *, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id}: {message}")


class EngineFailedError(CdcError):
    """The engine stopped because of an error; ``__cause__`` holds the original."""


class ApiError(CdcError):
    """An engine instance's control API answered a request with an error; ``status`` is the HTTP
    status (0: no answer), ``message`` the API's own words."""

    def __init__(self, method: str, url: str, status: int, message: str) -> None:
        self.method, self.url, self.status, self.message = method, url, status, message
        super().__init__(f"{method} {url} -> {status}: {message}" if status else f"{method} {url}: {message}")


class ApiRefusedError(ApiError, RefusedError):
    """The API refused the request as things stand (409), e.g. changing a running instance's offsets."""


class ApiUnavailableError(ApiError, RetriableError):
    """The API cannot answer now: unreachable, a timeout, or 502/503/504. Worth trying again."""


class MissingDependencyError(CdcError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"the optional dependency {module!r} is not installed; install it with: pip install 'airflow-cdc[{extra}]'"
        )
