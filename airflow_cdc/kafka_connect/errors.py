"""The engine-backend's errors for a connector on Kafka Connect, in the engine's one hierarchy:
operators and triggers judge them as they judge an embedded instance's (``operators/base.py``
``explain``). Unreachable or busy is ``ApiUnavailableError`` (retriable); refused as things stand
is ``ApiRefusedError``; anything else Connect refuses is a :class:`ConnectorError` whose message
says what to fix. A rejected configuration is ``ConfigError`` with Connect's validation messages.
"""

from __future__ import annotations

import re

from airflow_cdc.engine.errors import ApiRefusedError, ApiUnavailableError, CdcError, RefusedError
from airflow_cdc.kafka_connect.client import ConnectRestError, ConnectUnavailableError

_NOT_FOUND = re.compile(r"^(Connector .* not found|No status found for connector)", re.IGNORECASE)


class ConnectorError(CdcError):
    """Kafka Connect refused a request about the connector; ``status`` is the HTTP status and
    ``message`` Connect's words (the exception's text adds the fix)."""

    def __init__(self, method: str, url: str, status: int, message: str, fix: str = "") -> None:
        self.method, self.url, self.status, self.message = method, url, status, message
        super().__init__(f"Kafka Connect {method} {url} -> {status}: {message}" + (f": {fix}" if fix else ""))


class ConnectorNotFoundError(ConnectorError):
    """The connector does not exist on the cluster."""


class ConnectorUnavailableError(ApiUnavailableError):
    """Kafka Connect does not answer now (unreachable, starting, rebalancing), or the connector
    is STOPPED (``health()``): worth asking again."""

    #: Its message says what to do on Connect (the Airflow layer adds no fix of its own).
    explains_fix = True


class ConnectorRefusedError(ApiRefusedError):
    """Refused as things stand: offsets of a connector that is not STOPPED, a name taken."""


class SignalChannelError(RefusedError):
    """Debezium on Kafka Connect has no HTTP signal channel."""


def is_not_found(exc: ConnectRestError) -> bool:
    """Connect's answer for a connector that does not exist."""
    return exc.status == 404 and bool(_NOT_FOUND.match(exc.message))


def translated(exc: ConnectRestError, connector: str) -> CdcError:
    """A Connect client error as the backend's, with the fix."""
    if isinstance(exc, ConnectUnavailableError):
        fix = (
            "check that the cluster is up and reachable from here, or correct the connection's host"
            if exc.status == 0
            else "the cluster is busy (starting or rebalancing): ask again"
        )
        return ConnectorUnavailableError(exc.method, exc.url, exc.status, f"Kafka Connect: {exc.message}; {fix}")
    if is_not_found(exc):
        return ConnectorNotFoundError(
            exc.method,
            exc.url,
            exc.status,
            exc.message,
            f"create connector {connector!r} (create(config)), or correct the connector name the connection gives",
        )
    if exc.status == 409 or "STOPPED state" in exc.message:
        return ConnectorRefusedError(exc.method, exc.url, exc.status, exc.message)
    if exc.status in (401, 403):
        return ConnectorError(
            exc.method,
            exc.url,
            exc.status,
            exc.message,
            "the cluster refused the credentials: set the connection's login and password to a user of Connect's "
            "REST API",
        )
    return ConnectorError(exc.method, exc.url, exc.status, exc.message)
