"""Which failures to connect to PostgreSQL a retry can mend, told by SQLSTATE, never by words.

The server writes its messages in its ``lc_messages`` (a German server refuses a wrong password
with "Passwort-Authentifizierung für Benutzer »cdc« fehlgeschlagen"), so only codes decide:

- a refusal no retry mends fails the task at once, naming the fix (:data:`REFUSALS`): class 28
  (28P01 a wrong password, 28000 no pg_hba.conf rule, no such role, no LOGIN), 3D000 (no such
  database), 42501 (no CONNECT or REPLICATION privilege); and libpq's ``needs_password`` (the
  server asked for a password and none was given);
- anything else is worth retrying: 57P03 cannot_connect_now (starting up, in recovery, shutting
  down), 53300 too_many_connections (max_connections, the reserved slots, a role's or a
  database's limit), 57P01/57P02 (terminated), class 08, and a failure without any word from
  the server (refused, reset, "server closed the connection unexpectedly", a timeout).

Where the code comes from. An error on an established connection has it (``exc.sqlstate``). A
failure while connecting has not: libpq keeps that ErrorResponse to itself (psycopg's error has
no ``sqlstate`` and an empty ``diag``, and psycopg offers no PQsetErrorVerbosity), and libpq's
password flags cannot tell a wrong password from a full server - both come after the password
(checked with libpq 18 against PostgreSQL 15). So such a failure is tried again once, with
libpq's protocol trace on (PQtrace, libpq 14 or later on Linux: psycopg's ``PGconn.trace``),
which prints the ErrorResponse's fields; its ``C`` field is the SQLSTATE. The code counts only
when the second attempt fails with libpq's very message of the first (else the server changed
in between: retried, and asked again next time), and is then remembered for that message. The
trace holds the authentication exchange too: it goes to an anonymous memory file, dropped after
reading. Where libpq cannot trace, a failure after a password counts as a refusal, as before.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import sys
import time
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo

from airflow_cdc.engine.errors import CdcError, RetriableError

_CREDENTIALS = "fix database.user / database.password"
#: SQLSTATEs of refusals only the configuration or the server's rules can change, and the fix.
REFUSALS: dict[str, str] = {
    "28P01": f"{_CREDENTIALS} (28P01 invalid_password)",
    "28000": f"{_CREDENTIALS}, or the server's pg_hba.conf (a rule for this host, user and database) "
    "and the role (it must exist WITH LOGIN) (28000 invalid_authorization_specification)",
    "3D000": "fix database.dbname: the server has no such database (3D000 invalid_catalog_name)",
    "42501": "grant the role what it lacks: CONNECT on the database, and REPLICATION "
    "(ALTER ROLE ... REPLICATION) for the replication connection (42501 insufficient_privilege)",
}
#: The rest of class 28, invalid authorization specification.
_CLASS_28 = f"{_CREDENTIALS}, or the server's pg_hba.conf"
NO_PASSWORD = "set database.password: the server asks for one"
#: How long the traced second attempt may take. Its answers are kept (up to PROBES_KEPT): each
#: trace costs a FILE stream that psycopg never closes (a few kB), so a server down or full for
#: hours is asked once, not at every retry.
PROBE_TIMEOUT_S = 10.0
PROBES_KEPT = 256
_CAN_TRACE = sys.platform.startswith("linux") and pq.version() >= 140000 and hasattr(os, "memfd_create")
#: An ErrorResponse in libpq's trace: ``B <len> ErrorResponse S "FATAL" V "FATAL" C "28P01" M ...``
#: (the server sends S, V and C before the message).
_TRACED_CODE = re.compile(rb'\tErrorResponse\t[^\n]*? C "([0-9A-Z]{5})"')
_probed: dict[str, str | None] = {}

#: TLS refusals (libpq's own words, not the server's), and the settings that decide them. The
#: server's certificate first: libpq's "root certificate file ..." names a certificate file too.
_TLS_REFUSALS = (
    (
        re.compile(r"root certificate|certificate verify failed|server certificate", re.I),
        "database.sslrootcert (the CA that signed the server's certificate) or database.sslmode",
    ),
    (
        re.compile(r"requires a valid client certificate|certificate file|private key|certificate required", re.I),
        "database.sslcert and database.sslkey (the client certificate the server's hostssl ... cert rule asks for)",
    ),
)


def connect(conninfo: str, **kwargs: Any) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection (``kwargs``: e.g. ``replication="database"``), or the engine's
    error: CdcError naming the fix for a refusal, RetriableError for what a retry may mend."""
    try:
        return psycopg.connect(conninfo, autocommit=True, **kwargs)
    except psycopg.OperationalError as exc:
        raise connect_failure(exc) from exc


def connect_failure(exc: psycopg.OperationalError, doing: str = "cannot connect to PostgreSQL") -> CdcError:
    """The engine's error for a failed connect: CdcError naming the fix for a refusal (a
    certificate, a login), RetriableError (``doing: ...``) for what a retry may mend."""
    for refusal, settings in _TLS_REFUSALS:  # neither can a retry mend a certificate
        if refusal.search(str(exc)):
            return CdcError(f"PostgreSQL refused the TLS connection: {exc}; fix {settings}")
    fix = refusal_fix(exc)
    if fix is not None:
        return CdcError(f"PostgreSQL refused the connection: {str(exc).strip()}; {fix}")
    return RetriableError(f"{doing}: {str(exc).strip()}")


def refusal_fix(exc: psycopg.Error) -> str | None:
    """What to fix when ``exc`` (from connecting) is a refusal no retry can change; None when
    it is worth retrying."""
    pgconn = exc.pgconn
    if exc.sqlstate is None and pgconn is not None and pgconn.needs_password:
        return NO_PASSWORD
    state = sqlstate(exc)
    if state is None and not _CAN_TRACE and pgconn is not None and pgconn.used_password:
        return _CLASS_28  # no code to be had: a failure after the password counts as a refusal
    return state_fix(state)


def refused_for_good(exc: psycopg.Error) -> bool:
    """Whether ``exc`` (from connecting) is a refusal that a retry cannot change."""
    return refusal_fix(exc) is not None


def state_fix(state: str | None) -> str | None:
    """The fix for a refusal by its SQLSTATE; None for a code worth retrying (or none at all)."""
    if state is None:
        return None
    return REFUSALS.get(state) or (_CLASS_28 if state.startswith("28") else None)


def sqlstate(exc: psycopg.Error) -> str | None:
    """The server's SQLSTATE for ``exc``; None when the server said nothing (or cannot be asked)."""
    if exc.sqlstate:
        return exc.sqlstate
    pgconn = exc.pgconn
    if not _CAN_TRACE or pgconn is None or isinstance(exc, psycopg.errors.ConnectionTimeout):
        return None
    params = {o.keyword.decode(): o.val.decode() for o in pgconn.info if o.val is not None}
    # The same failure again (same words from the same server) has the same code: asked once.
    key = hashlib.sha256(repr((sorted(params.items()), pgconn.error_message)).encode()).hexdigest()
    if key in _probed:
        return _probed[key]
    message, state = _traced_attempt(make_conninfo(**params))
    if message != pgconn.error_message:
        return None  # the second attempt met another failure (or none): nothing learnt, retried
    if len(_probed) >= PROBES_KEPT:
        _probed.clear()
    _probed[key] = state
    return state


def _traced_attempt(conninfo: str) -> tuple[bytes, str | None]:
    """Connect once more with libpq's protocol trace on: libpq's message for the failure, and
    the SQLSTATE of the ErrorResponse traced (None: there was none - the server was not reached,
    dropped the connection, or let us in this time)."""
    trace = os.memfd_create("airflow-cdc-pg-connect-trace")
    try:
        pgconn = pq.PGconn.connect_start(conninfo.encode())
        try:
            pgconn.trace(trace)
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            while pgconn.status != pq.ConnStatus.BAD:
                polled = pgconn.connect_poll()
                remaining = deadline - time.monotonic()
                if polled in (pq.PollingStatus.OK, pq.PollingStatus.FAILED) or remaining <= 0:
                    break
                reading = polled == pq.PollingStatus.READING
                select.select([pgconn.socket] if reading else [], [] if reading else [pgconn.socket], [], remaining)
            message = pgconn.error_message if pgconn.status == pq.ConnStatus.BAD else b""
        finally:
            # Untraced before finish: libpq flushes the trace here, and would trace its goodbye
            # into a stream whose file is closed below.
            pgconn.untrace()
            pgconn.finish()
        os.lseek(trace, 0, os.SEEK_SET)
        return message, traced_sqlstate(os.read(trace, 1 << 20))
    finally:
        os.close(trace)


def traced_sqlstate(trace: bytes) -> str | None:
    """The SQLSTATE of the first ErrorResponse in a libpq protocol trace (None: there is none)."""
    found = _TRACED_CODE.search(trace)
    return found.group(1).decode() if found else None
