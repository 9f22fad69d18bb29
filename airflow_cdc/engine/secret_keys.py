"""Which configuration values are secrets, and how a configuration is shown without them.

One rule for the whole package (the engine, its control API, its config-file errors, the
Airflow hooks and backends): :func:`is_secret_key`. It judges a key by its name and, when given
the value, by what the value carries.

**By name** (case-insensitive, ``.``, ``_`` or ``-`` between words):

* ``password``, ``passwd`` or ``passphrase`` anywhere: ``database.password``,
  ``ssl.keystore.password``, ``database.sslpassword``, ``PGPASSWORD``, ``key.passphrase``;
* ``secret`` anywhere (not ``secrets``): ``client.secret``, ``aws.secret.access.key``;
* ``jaas`` anywhere: ``sasl.jaas.config`` holds the login's password;
* ``private.key`` / ``privatekey`` anywhere: ``ssh.private.key``, ``private_key``;
* inline key material: ``ssl.key`` and ``ssl.key.pem`` (librdkafka), ``ssl.keystore.key`` (Kafka);
* ``token``, ``credential(s)``, ``api.key`` / ``apikey`` as the last word: ``api.token``,
  ``access_token``, ``aws.credentials``.

Not secret, on purpose: **paths** to key material (``ssl.key.location``, ``database.sslkey``
- libpq's key *file* -, ``api.ssl.keyfile``, ``database.ssl.keystore``,
``ssl.keystore.location``): readers on other hosts need them, and a DAG may set them. Counts and
endpoints that merely contain a word (``token.count``, ``max.tokens``,
``sasl.oauthbearer.token.endpoint.url``, ``aws.credentials.provider``, a config provider named
``secrets``), user names (``database.user``, ``sasl.username``) and ``key.converter``.

**By value** (only when the value is given): a string that carries a password - a URL's
``user:password@`` (``jdbc:postgresql://app:pw@db/shop``) or a ``password=`` / ``pwd=``
parameter (``jdbc:postgresql://db/shop?password=pw``, ``Server=db;Password=pw``) - under any
key. Not recognised: Oracle's ``user/password@host`` form.

**Showing a configuration**: a secret by name is left out (:func:`without_secrets`: the control
API's ``GET /connectors/<name>``, which readers merge their own credentials over) or shown as
``********`` (:func:`masked`: a ``repr``, a log line); a value that carries a password keeps
everything but the password (``jdbc:postgresql://app:********@db/shop``), so host and database
stay visible and two masked URLs still compare by where they point.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "********"

_SECRET_NAME = re.compile(
    r"pass(?:word|wd|phrase)"
    r"|secret(?!s)"
    r"|jaas"
    r"|private[._-]?key"
    r"|(?:^|[._-])ssl[._-]key(?:[._-]pem)?$"
    r"|keystore[._-]key$"
    r"|token$"
    r"|credentials?$"
    r"|api[._-]?key$",
    re.IGNORECASE,
)
# ://user:password@ - the password may not hold '/' or '@' unescaped (RFC 3986), which keeps
# "http://host:8080/path@x" from looking like one.
_URL_PASSWORD = re.compile(r"(://[^/?#@\s:]*:)([^@/\s]+)(?=@)")
# password=..., pwd=..., quoted or up to the next separator of a query or connection string.
_PARAMETER_PASSWORD = re.compile(r"((?:password|passwd|pwd)\s*=\s*)('[^']*'|\"[^\"]*\"|[^&;,\s]+)", re.IGNORECASE)


def is_secret_key(key: str, value: Any = None) -> bool:
    """Whether ``key`` holds a secret: by its name, or - when ``value`` is given - because the
    value carries a password (see the module for the rules and the keys they leave alone)."""
    return bool(_SECRET_NAME.search(key)) or (isinstance(value, str) and _without_password(value) != value)


def _without_password(value: str) -> str:
    """``value`` with a URL's or connection string's password replaced by the mask."""
    value = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK, value)
    return _PARAMETER_PASSWORD.sub(lambda m: m.group(1) + MASK, value)


def masked_value(key: str, value: Any) -> Any:
    """``value`` as it may be shown: the mask for a secret key that is set, a URL or connection
    string with only its password masked, anything else unchanged."""
    if _SECRET_NAME.search(key):
        return MASK if value not in (None, "") else value
    return _without_password(value) if isinstance(value, str) else value


def masked(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every key of ``config``, secrets masked (for a ``repr`` or a log line)."""
    return {key: masked_value(key, value) for key, value in config.items()}


def without_secrets(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as it may leave the engine: secret keys left out (a reader takes credentials
    from its own connection, never from a mask it would send as a password), passwords inside
    other values masked."""
    return {key: masked_value(key, value) for key, value in config.items() if not _SECRET_NAME.search(key)}
