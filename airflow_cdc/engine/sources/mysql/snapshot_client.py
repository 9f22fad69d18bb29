"""The snapshot's connection: mysqlclient (``MySQLdb``, libmariadb parses the rows in C) when it
is installed, PyMySQL otherwise; both give a ``SELECT``'s values as the same Python objects.

Why: PyMySQL parses every field of every row in Python - two thirds of a snapshot's time (issue
30). mysqlclient reads a 20-column row in under a microsecond. Its values are made PyMySQL's
here, so the converters in ``types.py`` (written for PyMySQL's values) see no difference:

* text types: ``str`` in the connection's character set, ``bytes`` for a binary one (both
  libraries decide by the field's charset 63); ``bit`` and geometry are bytes; ``json`` is text;
* integers ``int``, ``float``/``double`` ``float``, ``decimal`` ``Decimal`` of the text;
* ``date``, ``datetime``, ``timestamp`` and ``time``: PyMySQL's own converters (an invalid
  or zero date stays its text), behind a C fast path for the valid values;
* any other type: the text, as PyMySQL decodes a type it has no converter for.

TLS (``database.ssl.*``, as ``mysql_client.tls_params`` gives it to PyMySQL) goes through
mysqlclient where libmariadb does exactly what the setting asks (:func:`mysqlclient_tls`):
``disabled``; ``required`` (encrypted, no certificate checked); ``verify_identity`` with a
truststore, to a host named as it is connected to. The rest stays on PyMySQL: ``verify_ca``
(libmariadb checks the host name along with the CA), ``preferred`` with stores, an encrypted
key (mysqlclient cannot pass its passphrase), ``verify_identity`` to ``localhost`` (reached at
an address, which the certificate would be checked against). A required encryption is checked
once connected (``Ssl_cipher``), as ``mysql_client`` checks PyMySQL's. ``localhost`` is reached
over TCP, as PyMySQL reaches it (:func:`connect`).
"""

from __future__ import annotations

import datetime as dt
import socket
from decimal import Decimal
from typing import Any

import pymysql
import pymysql.converters
import pymysql.cursors

from airflow_cdc.engine import mysql_client

try:
    import MySQLdb
    import MySQLdb.connections
    import MySQLdb.converters
    import MySQLdb.cursors
    from MySQLdb.constants import FIELD_TYPE
except ImportError:  # the ``mysql`` extra without mysqlclient (no libmariadb to build it)
    MySQLdb = None

#: Errors either library raises for a server error; ``args[0]`` is the server's error code.
ERRORS: tuple[type[BaseException], ...] = (pymysql.MySQLError,) + ((MySQLdb.MySQLError,) if MySQLdb else ())
#: libmariadb's "cannot connect" codes (CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_UNKNOWN_HOST).
_UNREACHABLE = (2002, 2003, 2005)


def _datetime(text: str) -> Any:
    """PyMySQL's ``convert_datetime``, with Python's C parser for the server's usual form
    ('YYYY-MM-DD hh:mm:ss[.f]': the same fields, the fraction padded to microseconds as
    PyMySQL pads it); what it refuses (a zero or invalid date) takes PyMySQL's path."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return pymysql.converters.convert_datetime(text)


def _date(text: str) -> Any:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return pymysql.converters.convert_date(text)


def _ascii(raw: bytes) -> str:
    return raw.decode("ascii")


def _conversions() -> dict[Any, Any]:
    conv: dict[Any, Any] = {k: v for k, v in MySQLdb.converters.conversions.items() if not isinstance(k, int)}
    conv.update(dict.fromkeys(range(256), _ascii))  # a type without its own: PyMySQL's ascii text
    for kind in (FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG, FIELD_TYPE.INT24):
        conv[kind] = int
    conv[FIELD_TYPE.YEAR] = int
    conv[FIELD_TYPE.FLOAT] = conv[FIELD_TYPE.DOUBLE] = float
    conv[FIELD_TYPE.DECIMAL] = conv[FIELD_TYPE.NEWDECIMAL] = Decimal
    conv[FIELD_TYPE.DATETIME] = conv[FIELD_TYPE.TIMESTAMP] = _datetime
    conv[FIELD_TYPE.DATE] = _date
    conv[FIELD_TYPE.TIME] = pymysql.converters.convert_timedelta
    # Bytes as they are (MySQLdb's default for a type mapped to None); the text types are
    # mapped by MySQLdb itself (use_unicode): str unless the field's charset is binary.
    conv[FIELD_TYPE.BIT] = conv[FIELD_TYPE.GEOMETRY] = None
    return conv


def mysqlclient_tls(connection: dict[str, Any]) -> dict[str, Any] | None:
    """mysqlclient's TLS arguments for the connection's PyMySQL ones (``mysql_client.tls_params``);
    None when only PyMySQL does exactly what they ask (see the module's docstring)."""
    ssl = connection.get("ssl")
    if connection.get("ssl_disabled") or ssl is None:
        return {"ssl_mode": "DISABLED"}  # as PyMySQL (Connector/C 3.4 would otherwise try TLS)
    if not connection.get(mysql_client.REQUIRE_TLS) or "password" in ssl:
        return None  # preferred with stores; an encrypted key
    verify = bool(ssl.get("verify_mode"))
    if verify and not (ssl.get("check_hostname") and "ca" in ssl):
        return None  # verify_ca; verify_identity against the system's CAs
    if verify and str(connection.get("host") or "localhost").lower() == "localhost":
        return None
    files = {"ca": ssl["ca"]} if "ca" in ssl else {}
    if "cert" in ssl:
        files.update(cert=ssl["cert"], key=ssl["cert"])  # one PEM file: the key and the chain
    return {"ssl_mode": "VERIFY_IDENTITY" if verify else "REQUIRED", "ssl": files}


def uses_mysqlclient(connection: dict[str, Any]) -> bool:
    """mysqlclient is installed and does what the connection's TLS settings ask."""
    return MySQLdb is not None and mysqlclient_tls(connection) is not None


def tcp_addresses(host: str, port: int) -> list[str]:
    """Where to connect for ``host``, in the order PyMySQL tries them. libmariadb takes
    ``localhost`` for its Unix socket; PyMySQL connects over TCP to the configured port
    (``socket.create_connection``: each address of ``getaddrinfo`` in turn). Connecting to the
    same addresses, in the same order, reaches the same server and matches the same account."""
    if host.lower() != "localhost":
        return [host]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos)) or [host]


def connect(connection: dict[str, Any], **options: Any) -> Any:
    """A connection for a snapshot (``charset`` utf8mb4): mysqlclient's when it can be,
    PyMySQL's otherwise (:func:`uses_mysqlclient`)."""
    params = {**connection, "charset": "utf8mb4", **options}
    tls = mysqlclient_tls(params) if MySQLdb is not None else None
    if tls is None:
        return mysql_client.connect(**params)
    for key in ("ssl", "ssl_disabled", mysql_client.REQUIRE_TLS):
        params.pop(key, None)
    password = params.pop("password", None) or ""
    if isinstance(password, bytes):
        password = password.decode("utf-8")
    if "db" in params:
        params.setdefault("database", params.pop("db"))
    host = str(params.pop("host", None) or "localhost")  # PyMySQL's default host
    failure: BaseException | None = None
    for address in tcp_addresses(host, int(params.get("port") or 3306)):
        try:
            conn = MySQLdb.connect(**params, **tls, host=address, password=password, conv=_conversions())
            if tls["ssl_mode"] != "DISABLED":
                _check_encrypted(conn)
            return conn
        except MySQLdb.OperationalError as exc:
            if exc.args[0] not in _UNREACHABLE:
                raise  # the server answered (a refused login, say): no other address will differ
            failure = exc  # nothing listens there: the next address, as PyMySQL tries them
    assert failure is not None
    raise failure


def _check_encrypted(conn: Any) -> None:
    """Refuse a connection that is not encrypted. libmariadb 3.3 refuses a server without TLS
    before authenticating only when it verifies the certificate; with ``required`` it connects
    in plaintext, as PyMySQL does - so the check here, as ``mysql_client`` checks PyMySQL's."""
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
    if not (row and row[1]):
        conn.close()
        raise MySQLdb.OperationalError(
            2026, "the server offers no TLS and database.ssl.mode requires it (enable ssl on the server)"
        )


def unbuffered_cursor(conn: Any) -> Any:
    """A cursor streaming its result (rows read as they are fetched)."""
    if MySQLdb is not None and isinstance(conn, MySQLdb.connections.Connection):
        return conn.cursor(MySQLdb.cursors.SSCursor)
    return conn.cursor(pymysql.cursors.SSCursor)
