"""PostgreSQL failures told apart by SQLSTATE, never by the server's words (no server needed;
tests/integration/test_postgres_connect_states.py asks a real one)."""

from __future__ import annotations

import psycopg
import pytest

from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.sources.postgres import connect_errors
from airflow_cdc.engine.sources.postgres.stream import SlotActiveError, stream_error

#: A wrong password on a German server, as libpq 18 traces it (PQTRACE_SUPPRESS_TIMESTAMPS).
TRACE = (
    b'F\t35\tStartupMessage\t 3 0 "user" "r2" "database" "postgres"\n'
    b'B\t23\tAuthenticationSASL\t "SCRAM-SHA-256" ""\n'
    b"F\t108\tSASLResponse\t 'c=biws,r=Qa8U,p=aJi5'\n"
    b'B\t98\tErrorResponse\t S "FATAL" V "FATAL" C "28P01" M "Passwort-Authentifizierung '
    b'f\xc3\xbcr Benutzer \xc2\xbbr2\xc2\xab fehlgeschlagen" F "auth.c" L "334" R "auth_failed" \\x00\n'
)


@pytest.mark.parametrize(
    ("state", "names"),
    [
        ("28P01", "database.password"),  # invalid_password
        ("28000", "pg_hba.conf"),  # no rule for this host/user/database, no such role, no LOGIN
        ("3D000", "database.dbname"),  # invalid_catalog_name
        ("42501", "REPLICATION"),  # insufficient_privilege
    ],
)
def test_a_refusal_is_for_good_and_names_the_fix(state: str, names: str) -> None:
    fix = connect_errors.state_fix(state)
    assert fix is not None and names in fix
    assert connect_errors.refused_for_good(psycopg.errors.lookup(state)("any words, any language"))


@pytest.mark.parametrize(
    "state",
    [
        "57P03",  # cannot_connect_now: starting up, in recovery, shutting down
        "53300",  # too_many_connections: max_connections, reserved slots, a role's or database's limit
        "08006",  # connection_failure
        "08001",  # sqlclient_unable_to_establish_sqlconnection
        "08P01",  # protocol_violation
        "57P01",  # admin_shutdown: pg_terminate_backend
        "57P02",  # crash_shutdown
        "53200",  # out_of_memory
        None,  # no word from the server: refused, reset, closed, timed out
    ],
)
def test_anything_else_is_worth_retrying(state: str | None) -> None:
    assert connect_errors.state_fix(state) is None
    if state is not None:
        assert not connect_errors.refused_for_good(psycopg.errors.lookup(state)("the server is busy"))


def test_a_failure_without_any_server_word_is_retried() -> None:
    # libpq's "server closed the connection unexpectedly": no SQLSTATE, no connection to ask again.
    error = psycopg.OperationalError("server closed the connection unexpectedly")
    assert error.sqlstate is None and error.pgconn is None
    assert connect_errors.refusal_fix(error) is None


def test_the_code_is_read_from_the_protocol_trace_not_from_the_message() -> None:
    assert connect_errors.traced_sqlstate(TRACE) == "28P01"
    # A message that itself looks like a field: the code is the C field before the message.
    tricky = TRACE.replace(b'M "Passwort', b'M "x C "53300" Passwort')
    assert connect_errors.traced_sqlstate(tricky) == "28P01"
    succeeded = b"B\t5\tReadyForQuery\t I\n"
    assert connect_errors.traced_sqlstate(TRACE.split(b"B\t98")[0] + succeeded) is None
    assert connect_errors.traced_sqlstate(b"") is None  # nothing reached the server


@pytest.mark.parametrize(
    ("state", "kind", "says"),
    [
        ("55006", SlotActiveError, "slot.name"),  # object_in_use: our lost WAL sender not yet gone
        ("57P01", RetriableError, "57P01"),  # admin_shutdown: the WAL sender was terminated
        ("57P02", RetriableError, "57P02"),  # crash_shutdown: another backend crashed
        ("08006", RetriableError, "08006"),
        (None, RetriableError, "no reason"),  # the connection dropped without a word
        ("42704", CdcError, "create it"),  # undefined_object: no such slot, publication dropped
        ("55000", CdcError, "drop it"),  # object_not_in_prerequisite_state: slot invalidated
        ("42501", CdcError, "REPLICATION"),  # insufficient_privilege
    ],
)
def test_a_replication_failure_is_classified_by_its_sqlstate(state: str | None, kind: type, says: str) -> None:
    error = stream_error(state, "the server ended the replication stream: " + ("" if state else "no reason"), "s")
    assert type(error) is kind and says in str(error), repr(error)
    assert isinstance(error, RetriableError) == (kind is not CdcError)
