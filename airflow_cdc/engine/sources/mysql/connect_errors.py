"""Which failures to connect to MySQL/MariaDB no retry can mend, told by error code.

The message is in the server's ``lc_messages`` ("Benutzer 'cdc'@'host' hat keine
Zugriffsberechtigung" for 1045 on a German server); the code is the same in every language, so
only codes decide here. A refusal is reported at once, naming the settings to fix; anything
else (a server down or restarting, too many connections) is worth retrying.
"""

from __future__ import annotations

#: Server and client error codes of refusals that only the configuration or the account can
#: change, and what to fix for each.
_CREDENTIALS = "fix database.user / database.password"
REFUSALS: dict[int, str] = {
    1044: "grant the user access to the database (ER_DBACCESS_DENIED_ERROR)",
    1045: f"{_CREDENTIALS} (ER_ACCESS_DENIED_ERROR)",
    1049: "fix database.include.list or the database named (ER_BAD_DB_ERROR)",
    1130: "allow the user to connect from this host: CREATE USER 'user'@'host' (ER_HOST_NOT_PRIVILEGED)",
    1251: "give the user an authentication plugin PyMySQL speaks (ER_NOT_SUPPORTED_AUTH_MODE)",
    1275: "set the user's password again, in the new format (ER_SERVER_IS_IN_SECURE_AUTH_MODE)",
    1698: f"{_CREDENTIALS}: the account takes no password over TCP, e.g. unix_socket "
    "(ER_ACCESS_DENIED_NO_PASSWORD_ERROR)",
    1862: "change the user's expired password (ER_MUST_CHANGE_PASSWORD_LOGIN)",
    2059: "give the user an authentication plugin PyMySQL speaks (CR_AUTH_PLUGIN_CANNOT_LOAD)",
    3118: "unlock the account: ALTER USER ... ACCOUNT UNLOCK (MySQL's ER_ACCOUNT_HAS_BEEN_LOCKED)",
    4151: "unlock the account: ALTER USER ... ACCOUNT UNLOCK (MariaDB's ER_ACCOUNT_HAS_BEEN_LOCKED)",
}
#: CR_SSL_CONNECTION_ERROR: the TLS handshake failed, or TLS is required and the server has none.
TLS_FAILED = 2026


def error_code(exc: BaseException) -> int | None:
    """The MySQL error code a PyMySQL error carries (None: a message without one)."""
    code = exc.args[0] if exc.args else None
    return code if isinstance(code, int) else None


def refusal_fix(exc: BaseException) -> str | None:
    """What to fix when ``exc`` is a refusal no retry can change; None when it is not one."""
    code = error_code(exc)
    if code is None:
        return None
    fix = REFUSALS.get(code)
    if fix is not None and code in (1045, 1698):
        fix += ", or database.ssl.keystore when the user must present a certificate (REQUIRE X509)"
    return fix
