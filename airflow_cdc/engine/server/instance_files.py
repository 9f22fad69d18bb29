"""An engine instance's settings and files: its configuration keys (``state.dir``, ``api.*``), its
state directory, the lock that says it runs, its status file and its API token.


Everything an instance keeps lives in its state directory (``state.dir``, by default
``~/.airflow-cdc/<name>``):

* ``instance.lock`` - held (flock) while the instance runs: "is it running?" is answered by the
  kernel, so a ``kill -9`` leaves no stale claim behind;
* ``instance.json`` - pid, state, API address, error; rewritten atomically on every change, so
  ``start`` can wait for the state and ``status`` can report a stopped instance;
* ``api.token`` - the generated bearer token (mode 0600) when ``api.token`` is not set;
* ``notifications.jsonl`` - the api channel's notifications of this run and earlier ones, so a
  reader's cursor survives a restart (``airflow_cdc.engine.notifications``);
* ``offsets.json`` and ``changelog/`` - the defaults of ``offset.storage.file.filename`` and
  ``sink.changelog.dir``.

The directory, and the files created here, are private to the instance's user (``0700``/``0600``,
``private_files``): the offsets and the changelog hold captured rows.

Every run of an instance has an id (``run_id`` in its status, the notification bus's).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import logging
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from airflow_cdc.engine.config import ConfigDef, Field, is_secret_key
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.private_files import open_private, private_dir
from airflow_cdc.engine.server.config_providers import resolve_references
from airflow_cdc.engine.validation import ValidatedConfig, config_component, sink_component, validate_config

log = logging.getLogger(__name__)

INSTANCE_CONFIG = ConfigDef(
    [
        Field(
            "state.dir",
            default="",
            doc="The instance's directory (offsets, changelog, status, log); default ~/.airflow-cdc/<name>.",
        ),
        Field("api.enabled", type="bool", default=True, doc="Serve the control HTTP API."),
        Field("api.host", default="127.0.0.1", doc="Address the control API binds to (loopback by default)."),
        Field("api.port", type="int", default=0, minimum=0, doc="0: any free port (see instance.json)."),
        Field(
            "api.token",
            default="",
            doc="Bearer token of the control API; empty: generated once into <state.dir>/api.token.",
        ),
        Field("api.ssl.certfile", default="", doc="The control API's certificate (PEM): it then serves HTTPS."),
        Field("api.ssl.keyfile", default="", doc="The certificate's private key (PEM)."),
        Field(
            "api.ssl.cafile",
            default="",
            doc="CA bundle (PEM) the API's clients' certificates must be signed by: set, a client needs one.",
        ),
        Field(
            "api.behind.proxy",
            type="bool",
            default=False,
            doc="Serve plain HTTP on a non-loopback api.host because a TLS-terminating proxy is the only way in.",
        ),
        Field(
            "api.read.timeout.ms",
            type="int",
            default=10_000,
            minimum=1,
            doc="A request (line, headers, body) must arrive within this of its first byte or of the connection "
            "opening; a slower client gets 408 and is disconnected.",
        ),
    ]
)


@dataclass(frozen=True)
class Tls:
    """The API's certificate (``api.ssl.certfile``/``keyfile``), and the CA its clients'
    certificates must be signed by when it asks for them (``api.ssl.cafile``)."""

    certfile: str
    keyfile: str
    cafile: str = ""


LOCK, STATUS, TOKEN, LOG = "instance.lock", "instance.json", "api.token", "engine.log"
NOTIFICATIONS = "notifications.jsonl"


def state_dir(props: Mapping[str, Any]) -> Path:
    configured = str(props.get("state.dir") or "")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".airflow-cdc" / str(props.get("name") or "engine")


def resolve(props: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration with the defaults that live in the state directory filled in, and its
    ``${env:...}`` / ``${directory:...}`` / ``${file:...}`` references resolved
    (``config_providers.py``)."""
    directory = state_dir(props)
    out = resolve_references(props)
    out["state.dir"] = str(directory)
    out.setdefault("offset.storage.file.filename", str(directory / "offsets.json"))
    out.setdefault("sink.changelog.dir", str(directory / "changelog"))
    return out


def validated(props: Mapping[str, Any], *, strict: bool | None = None) -> ValidatedConfig:
    """The whole configuration - instance, sink, engine, connector, transforms - validated (no
    engine is built); ConfigError lists every problem once. Unknown keys are its ``warnings``."""
    return validate_config(
        resolve(props), components=(config_component("instance", INSTANCE_CONFIG), sink_component()), strict=strict
    )


def check(props: Mapping[str, Any], *, strict: bool | None = None) -> list[ConfigProblem]:
    """Every problem of the instance, sink and engine configuration (not just the first)."""
    try:
        validated(props, strict=strict)
    except ConfigError as exc:
        return exc.problems
    return []


def read_status(directory: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads((directory / STATUS).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def is_running(directory: Path) -> bool:
    """Whether an instance holds the state directory's lock."""
    try:
        with _locked(directory, blocking=False):
            return False
    except BlockingIOError:
        return True


@contextlib.contextmanager
def _locked(directory: Path, *, blocking: bool) -> Iterator[IO[str]]:
    private_dir(directory)
    with os.fdopen(open_private(directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        try:
            yield lock
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def offsets_lock(directory: Path) -> contextlib.AbstractContextManager[IO[str]]:
    """Held while offsets are changed from outside: refuses (BlockingIOError) a running instance."""
    return _locked(directory, blocking=False)


def api_token(settings: Mapping[str, Any]) -> str:
    """The token a client sends: ``api.token``, else the instance's generated one (empty if it
    has none yet - which the API never accepts)."""
    configured = str(settings.get("api.token") or "").strip()
    if configured:
        return configured
    try:
        return (Path(settings["state.dir"]) / TOKEN).read_text().strip()
    except FileNotFoundError:
        return ""


def ensure_api_token(settings: Mapping[str, Any]) -> str:
    """The instance's token: ``api.token``, else the one generated into ``<state.dir>/api.token``
    - written whole or not at all (a crash between creating and writing it once left an empty
    file, and an empty token let any request in), and generated again if empty."""
    token = api_token(settings)
    if token:
        return token
    token = secrets.token_urlsafe(32)
    path = Path(settings["state.dir"]) / TOKEN
    temp = path.with_name(f".{TOKEN}.{os.getpid()}.tmp")
    fd = open_private(temp)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, path)
    return token


def api_tls(settings: Mapping[str, Any]) -> Tls | None:
    """The API's TLS settings; ConfigError for a half-set certificate, or for plain HTTP on a
    non-loopback address without ``api.behind.proxy`` (the token would cross a network in clear)."""
    certfile, keyfile = str(settings["api.ssl.certfile"] or ""), str(settings["api.ssl.keyfile"] or "")
    if bool(certfile) != bool(keyfile):
        raise ConfigError(
            [ConfigProblem("api.ssl.keyfile", "api.ssl.certfile and api.ssl.keyfile go together", "set both, or none")]
        )
    host = str(settings["api.host"])
    if not certfile and not _loopback(host) and not settings["api.behind.proxy"]:
        raise ConfigError(
            [
                ConfigProblem(
                    "api.host",
                    f"{host} is reachable from other hosts, and the API would serve plain HTTP (its token in clear)",
                    "set api.ssl.certfile and api.ssl.keyfile, or api.behind.proxy: true when a TLS-terminating "
                    "proxy (an ingress, a service mesh) is the only way in",
                )
            ]
        )
    return Tls(certfile, keyfile, str(settings["api.ssl.cafile"] or "")) if certfile else None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


#: The keys that say which instance it is: a DAG's configuration may not set them.
IDENTITY_KEYS = ("name", "state.dir")


def override_problems(overrides: Mapping[Any, Any]) -> list[ConfigProblem]:
    """What an operator's ``config`` may not set: secrets (they belong in connections) and the
    instance's identity (the ``cdc_engine`` connection decides which instance it is)."""
    problems: list[ConfigProblem] = []
    for key in overrides:
        if not isinstance(key, str):
            problems.append(ConfigProblem(repr(key), "is not a configuration key", "use Debezium's property names"))
        elif is_secret_key(key):
            problems.append(
                ConfigProblem(
                    key,
                    "is a secret and cannot be given in a DAG",
                    "put the password in the source connection (source_conn_id) or in the instance's config file",
                )
            )
        elif key in IDENTITY_KEYS:
            problems.append(
                ConfigProblem(
                    key,
                    "names the instance, which the cdc_engine connection decides",
                    "set it in the instance's config file (the connection's config_path)",
                )
            )
    return problems
