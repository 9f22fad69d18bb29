"""Which failures to connect to PostgreSQL no retry can mend, told by codes, not words.

The server writes its messages in its ``lc_messages``: a German server refuses a wrong password
with "Passwort-Authentifizierung für Benutzer »cdc« fehlgeschlagen", so matching the English
words retried a wrong password for ever there. What is the same in every language:

- the SQLSTATE, when psycopg has one (``exc.sqlstate``): class 28 (invalid authorization:
  28000, 28P01), 3D000 (no such database), 42501 (no CONNECT or REPLICATION privilege);
- libpq's account of the password exchange, for a failure while connecting. There libpq keeps
  the server's SQLSTATE to itself: psycopg's error has no ``sqlstate``, an empty ``diag``, and
  no result to read it from (checked with libpq 18 against PostgreSQL 15). But its
  ``pgconn`` (a ``FinishedPGconn``) says whether the server asked for a password:
  ``needs_password`` - it asked and none was given; ``used_password`` - one was sent and the
  connection still failed, so the server refused the password, or what it checks right after
  it (the role may log in, the database exists, CONNECT). Neither happens to a server that is
  merely down or starting up: those answer before any password is asked for.

Left is a refusal before any password (trust, peer, cert or a missing pg_hba.conf line), which
libpq reports with the server's words only. The English words are kept for that case alone; on
a server in another language it is retried like a transient failure, as before, and fails
with the server's message once ``errors.max.retries`` is spent. One retriable refusal does come
after a password: "remaining connection slots are reserved" and a role's or database's
connection limit (53300), which therefore fail at once when a password was used.
"""

from __future__ import annotations

import re

import psycopg

#: SQLSTATE classes and codes of refusals only the configuration or the server's rules can change.
PERMANENT_CLASSES = frozenset({"28"})
PERMANENT_STATES = frozenset({"3D000", "42501"})

#: The server's English words for refusals before any password (trust, peer, cert, pg_hba.conf).
_ENGLISH_REFUSALS = re.compile(r'no pg_hba\.conf entry|role "[^"]*" does not exist|database "[^"]*" does not exist')


def refused_for_good(exc: psycopg.Error) -> bool:
    """Whether ``exc`` (from connecting) is a refusal that a retry cannot change."""
    state = exc.sqlstate
    if state:
        return state[:2] in PERMANENT_CLASSES or state in PERMANENT_STATES
    pgconn = exc.pgconn
    if pgconn is not None and (getattr(pgconn, "needs_password", False) or getattr(pgconn, "used_password", False)):
        return True
    return _ENGLISH_REFUSALS.search(str(exc)) is not None
