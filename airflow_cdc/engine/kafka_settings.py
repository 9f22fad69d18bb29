"""Kafka client settings as users write them, turned into kafka-python keyword arguments: the one
translation every kafka-python client of the package goes through (the sink's producer and its
topic creation, the Kafka offset store, the Kafka signal channel, the Airflow-side readers and
the Spark data source).

Users write the names of Kafka's Java client and of librdkafka, as Kafka Connect, Debezium and
the confluent sink take them: ``security.protocol``, ``sasl.mechanism``, ``sasl.username`` /
``sasl.password`` (librdkafka) or ``sasl.jaas.config`` (Java), ``ssl.ca.location`` or a PEM
``ssl.truststore.location``, ``ssl.certificate.location`` / ``ssl.key.location`` or a PEM
``ssl.keystore.location``. kafka-python's own names, dotted (``sasl.plain.username``,
``ssl.cafile``), are accepted too: configurations written for it keep working. A Java setting
kafka-python cannot honour (a JKS store, a Kerberos JAAS module) is refused with what to write
instead, never dropped: a client that silently connects without its TLS settings would only
fail later, and less clearly.

Which settings say how to reach and log in to the brokers - :func:`security_settings` - is also
decided here, so a client derived from another (the sink's admin client from its producer, an
Airflow reader from the instance's sink) carries exactly those.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from airflow_cdc.engine.config import Field
from airflow_cdc.engine.errors import ConfigError, ConfigProblem

C = TypeVar("C")

#: Prefixes of the settings that say how a client reaches and authenticates to the brokers.
SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
#: The security settings declared one by one where a component cannot take a whole prefix (its
#: settings are parsed fields: the offset store's, the signal channel's).
SECURITY_KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
)

#: librdkafka and Java names kafka-python spells differently (the rest: dots become underscores).
RENAMED = {
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.truststore.location": "ssl_cafile",  # PEM only (checked below)
    "ssl.certificate.location": "ssl_certfile",
    # A PEM keystore holds the key and its certificate chain in one file; Python's
    # load_cert_chain reads the key from the certificate file when no key file is given.
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
}
_PEM_ONLY = "kafka-python reads PEM files only: convert the store (keytool, openssl) and set its type to PEM"
#: Java settings with no kafka-python counterpart, and what to set instead.
JAVA_ONLY = {
    "ssl.keystore.certificate.chain": "write the chain to a file and set ssl.certificate.location",
    "ssl.keystore.key": "write the key to a file and set ssl.key.location",
    "ssl.truststore.certificates": "write the certificates to a file and set ssl.ca.location",
    "sasl.client.callback.handler.class": "remove it: kafka-python cannot load Java classes",
    "sasl.login.callback.handler.class": "remove it: kafka-python cannot load Java classes",
    "interceptor.classes": "remove it: kafka-python cannot load Java classes",
}
#: Java's "" (and librdkafka's "none") turns the host name check off, so "" is a value here.
_HOST_CHECK = "ssl.endpoint.identification.algorithm"
#: Settings without a meaning for kafka-python once the rest is translated.
_CONSUMED = frozenset({"ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password"})
#: kafka-python settings that hold Python objects: no configuration string can give one.
_OBJECT_SETTINGS = frozenset(
    {
        "kafka_client",
        "selector",
        "partition_assignment_strategy",
        "metric_reporters",
        "default_offset_commit_callback",
        "ssl_context",
        "sasl_oauth_token_provider",
        "socket_options",
        "key_serializer",
        "value_serializer",
        "key_deserializer",
        "value_deserializer",
        "partitioner",
    }
)
#: kafka-python settings whose default is None but whose value is a number.
_INT_SETTINGS = frozenset({"receive_buffer_bytes", "send_buffer_bytes"})
#: ``sasl.jaas.config``: the login module, then ``name="value"`` options.
_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\b(?P<options>.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def security_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The security settings under ``prefix`` (Java/librdkafka names, without the prefix)."""
    out = {}
    for key, value in settings.items():
        name = key[len(prefix) :] if key.startswith(prefix) else None
        if name and name.startswith(SECURITY_PREFIXES) and (value not in (None, "") or name == _HOST_CHECK):
            out[name] = value
    return out


def security_fields(prefix: str, what: str) -> tuple[Field, ...]:
    """The security settings as declared fields ``<prefix><key>`` (None: not set; "" is a value
    of ``ssl.endpoint.identification.algorithm``)."""
    return tuple(Field(f"{prefix}{key}", default=None, doc=f"{what}: the client's {key}.") for key in SECURITY_KEYS)


def kafka_python_config(
    settings: Mapping[str, Any],
    known: Mapping[str, Any],
    *,
    prefix: str = "",
    strict: bool = True,
    owned: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """kafka-python keyword arguments from the settings under ``prefix`` (``known``: the client
    class's ``DEFAULT_CONFIG``). Raises ``ConfigError`` naming ``<prefix><name>`` for a setting
    kafka-python cannot honour; with ``strict=False`` a name the client lacks is skipped instead
    (a producer's ``acks`` handed to an admin client). ``owned``: kafka-python names the caller
    sets itself, with what to do instead."""
    out: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    named = {key[len(prefix) :]: value for key, value in settings.items() if key.startswith(prefix)}
    for name, value in named.items():
        if value is None or (value == "" and name.startswith(SECURITY_PREFIXES) and name != _HOST_CHECK):
            continue
        problem = _translate(name, value, named, known, out, owned or {}, strict)
        if problem is not None:
            problems.append(ConfigProblem(prefix + problem[0], problem[1], problem[2]))
    if problems:
        raise ConfigError(problems)
    return out


def _translate(
    name: str,
    value: Any,
    named: Mapping[str, Any],
    known: Mapping[str, Any],
    out: dict[str, Any],
    owned: Mapping[str, str],
    strict: bool,
) -> tuple[str, str, str] | None:
    """Put ``name``'s argument(s) into ``out``; a ``(name, problem, fix)`` when it cannot."""
    handled, problem = _translate_java(name, value, named, out)
    if handled:
        return problem
    arg = RENAMED.get(name, name.replace(".", "_"))
    if arg in owned:
        return name, "is set by this client itself", owned[arg]
    if arg not in known or arg in _OBJECT_SETTINGS:
        if not strict:
            return None
        return name, "is not a setting of kafka-python's client", "remove it or correct its name"
    try:
        out[arg] = coerce(arg, value, known[arg])
    except ValueError as exc:
        return name, f"{value!r}: {exc}", "give a value of the setting's type"
    return None


Problem = tuple[str, str, str]


def _translate_java(
    name: str, value: Any, named: Mapping[str, Any], out: dict[str, Any]
) -> tuple[bool, Problem | None]:
    """The Java settings that need more than a new name: ``(True, problem or None)`` when
    ``name`` is one of them (handled here), ``(False, None)`` when it is not."""
    if name in JAVA_ONLY:
        return True, (name, "is a Java client setting kafka-python has no counterpart of", JAVA_ONLY[name])
    if name in _CONSUMED:
        if name.endswith(".type") and str(value).strip().upper() != "PEM":
            fix = f"set {name}=PEM, or use ssl.ca.location / ssl.certificate.location"
            return True, (name, f"{value!r}: {_PEM_ONLY}", fix)
        return True, None
    if name == "sasl.jaas.config":
        return True, _jaas(str(value), out)
    if name == _HOST_CHECK:
        # Java's "" (and librdkafka's "none") turns the host name check off; "https" keeps it.
        out["ssl_check_hostname"] = str(value).strip().lower() not in ("", "none")
        return True, None
    if name in ("ssl.truststore.location", "ssl.keystore.location"):
        type_key = name.replace(".location", ".type")
        store_type = str(named.get(type_key, "JKS")).strip().upper()
        if store_type != "PEM":
            return True, (name, f"is a {store_type} store: {_PEM_ONLY}", f"set {type_key}=PEM")
    return False, None


def _jaas(text: str, out: dict[str, Any]) -> tuple[str, str, str] | None:
    """PLAIN and SCRAM logins (a user name and a password) are what kafka-python takes."""
    match = _JAAS.match(text)
    options = dict(_JAAS_OPTION.findall(match.group("options"))) if match else {}
    if not match or match.group("module") not in _JAAS_MODULES or "username" not in options:
        return (
            "sasl.jaas.config",
            "is not a PlainLoginModule or ScramLoginModule login with a username and password",
            "set sasl.username and sasl.password (kafka-python logs in with PLAIN, SCRAM, GSSAPI or OAUTHBEARER)",
        )
    out["sasl_plain_username"] = options["username"].replace('\\"', '"')
    out["sasl_plain_password"] = options.get("password", "").replace('\\"', '"')
    return None


def coerce(arg: str, value: Any, default: Any) -> Any:
    """A configuration string as the type kafka-python expects for ``arg`` (its default's)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError("not true or false")
        return text.lower() == "true"
    if isinstance(default, int) or arg in _INT_SETTINGS:
        return int(text)
    if isinstance(default, float):
        return float(text)
    if arg == "api_version":
        return tuple(int(part) for part in text.split("."))
    return value


def open_client(factory: Callable[..., C], kwargs: Mapping[str, Any], *, setting_prefix: str) -> C:
    """``factory(**kwargs)``, after one connection that tells a refused login or TLS handshake
    apart: kafka-python's clients retry those until their bootstrap timeout (30 s) and then say
    only "Unable to bootstrap", and no retry mends a wrong password. Raises ``ConfigError``
    naming the ``<setting_prefix>`` setting to fix; the client's own errors pass unchanged. The
    check costs one connection (milliseconds) and only for clients that use TLS or SASL."""
    refused = login_refusal(kwargs, setting_prefix)
    if refused is not None:
        raise refused
    return factory(**kwargs)


def login_refusal(kwargs: Mapping[str, Any], setting_prefix: str, timeout_ms: int = 5_000) -> ConfigError | None:
    """Connect once to the first bootstrap broker with ``kwargs`` and report a refused SASL
    login, an unsupported mechanism or a failed certificate check; None for anything else
    (a broker that is down is for the caller's retries)."""
    protocol = str(kwargs.get("security_protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    failure, answered = _first_connection_failure(kwargs, timeout_ms)
    if failure is None:
        return None
    from kafka.errors import KafkaConnectionError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError

    servers, user = kwargs.get("bootstrap_servers"), kwargs.get("sasl_plain_username")
    # A broker that answered ApiVersions and then closed the connection did so during the SASL
    # login: it closes after refusing one, and kafka-python drops the refusal when the closing
    # arrives in the same read (it discards the bytes received with the end of the stream).
    refused = isinstance(failure, SaslAuthenticationFailedError) or (
        protocol.startswith("SASL") and answered and isinstance(failure, KafkaConnectionError)
    )
    if refused:
        key, problem = "sasl.password", f"the brokers at {servers} refused the SASL login of {user!r} ({failure})"
        fix = (
            f"check {setting_prefix}sasl.username and {setting_prefix}sasl.password (or "
            f"{setting_prefix}sasl.jaas.config) and {setting_prefix}sasl.mechanism"
        )
    elif isinstance(failure, UnsupportedSaslMechanismError):
        key, problem = "sasl.mechanism", str(failure)
        fix = f"set {setting_prefix}sasl.mechanism to one the brokers enable"
    elif "CERTIFICATE_VERIFY_FAILED" in str(failure):
        key, problem = "ssl.ca.location", f"the certificate of the brokers at {servers} is not trusted: {failure}"
        fix = f"set {setting_prefix}ssl.ca.location to the PEM file of the CA that signed it"
    else:
        return None
    return ConfigError([ConfigProblem(setting_prefix + key, problem, fix)])


def _first_connection_failure(kwargs: Mapping[str, Any], timeout_ms: int) -> tuple[BaseException | None, bool]:
    """Why one connection to the first bootstrap broker failed (None: it did not, or no answer
    in time), and whether the broker had answered ApiVersions. kafka-python's connection layer,
    used directly: its clients swallow the reason and retry until their bootstrap timeout."""
    try:
        from kafka import KafkaAdminClient
        from kafka.net.compat import KafkaNetClient

        client = KafkaNetClient(**{**KafkaAdminClient.DEFAULT_CONFIG, **kwargs})
    except Exception:  # another kafka-python: no diagnosis, the client's own error stands
        return None, False
    try:
        node = client.cluster.bootstrap_brokers()[0]
        client.maybe_connect(node.node_id)
        conn = client._manager._conns.get(node.node_id)
        if conn is None:
            return None, False
        client._net.poll(timeout_ms=timeout_ms, future=conn.init_future)
        failure = conn.init_future.exception if conn.init_future.is_done else None
        # With api_version given, the connection starts with version data: no telling then.
        return failure, conn.broker_version_data is not None and not kwargs.get("api_version")
    except Exception:
        return None, False
    finally:
        with contextlib.suppress(Exception):
            client._manager.close()


def java_client_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings for Kafka's Java client (Spark's own Kafka source), from the same names the
    kafka-python clients take: librdkafka's SASL login becomes a JAAS config and its CA file a
    PEM trust store. Java and unknown names pass unchanged (the Java client judges them)."""
    out = dict(settings)
    username, password = out.pop("sasl.username", None), out.pop("sasl.password", None)
    if "sasl.mechanisms" in out:
        out["sasl.mechanism"] = out.pop("sasl.mechanisms")
    if username is not None and "sasl.jaas.config" not in out:
        mechanism = str(out.get("sasl.mechanism", "PLAIN")).upper()
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        quoted = [str(v).replace("\\", "\\\\").replace('"', '\\"') for v in (username, password or "")]
        out["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{quoted[0]}" password="{quoted[1]}";'
        )
    if "ssl.ca.location" in out:
        out["ssl.truststore.location"] = out.pop("ssl.ca.location")
        out["ssl.truststore.type"] = "PEM"
    if "ssl.certificate.location" in out or "ssl.key.location" in out:
        raise ConfigError(
            [
                ConfigProblem(
                    "ssl.certificate.location",
                    "has no counterpart in Kafka's Java client, which reads the key and its certificate from one file",
                    "set ssl.keystore.location to a PEM file holding the key and the certificate chain, "
                    "and ssl.keystore.type=PEM",
                )
            ]
        )
    return out
