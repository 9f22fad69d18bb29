"""``pymysql.connect`` with the password sent as UTF-8.

Why: PyMySQL encodes a ``str`` password as latin-1, so a password with a character outside it
(``cdc-pw ☂``) failed with a codec error before reaching the server. The server hashes the bytes
the password was set with, which are UTF-8 when it was set from a ``utf8mb4`` session (every
current client's default); bytes are passed through as they are.
"""

from __future__ import annotations

from typing import Any


def connect(**params: Any) -> Any:
    import pymysql  # loaded by those who connect, not by every importer of this module

    if "db" in params:  # mysql-replication's name for it, which PyMySQL deprecates
        params.setdefault("database", params.pop("db"))
    password = params.get("password")
    if isinstance(password, str):
        params["password"] = password.encode("utf-8")
    return pymysql.connect(**params)
