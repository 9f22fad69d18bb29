"""The docker stack (``docker/``) as far as it can be checked without Docker: the compose file
parses and uses only Compose's service keys, every image is pinned to an exact release (the
project's own pins where it has one), every file the stack mounts, builds or copies exists and
reaches the build, ports are unique, and the Airflow connections, engine instance configs and
Kafka Connect connector configs agree with each other, with the example DAGs and with the
services they name. The init SQL runs in ``tests/integration/docker``."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.config_providers import resolve_references
from airflow_cdc.engine.server.instance_files import validated
from tests.unit.docker import stack

SERVICES = {"postgres", "mariadb", "kafka", "connect", "engine", "airflow"}
#: The services that run engine instances: the engine service, and Airflow's worker (embedded).
ENGINE_SERVICES = ("engine", "airflow")
#: The service keys the stack may use (a misspelt one, ``enviroment``, is dropped by nothing).
SERVICE_KEYS = {
    "image",
    "build",
    "entrypoint",
    "command",
    "environment",
    "volumes",
    "ports",
    "depends_on",
    "healthcheck",
}
DOCKERFILES = sorted(stack.DOCKER.glob("*/Dockerfile"))
#: Numeric components of an exact release: x.y.z, except PostgreSQL's major.minor scheme.
RELEASE_PARTS = {"postgres": 2}
CLI = Path(sys.executable).parent / "airflow-cdc"


def engine_configs(service: str | None = None) -> dict[str, Path]:
    """The engine instance configs the engine services mount, by their path in the container."""
    return {
        mount.target: mount.host_path
        for name in ([service] if service else ENGINE_SERVICES)
        for mount in stack.mounts(name)
        if mount.bind and mount.target.endswith((".yaml", ".yml", ".properties"))
    }


def engine_env() -> dict[str, str]:
    """The environment the engine service's config file reads (``${env:NAME}``)."""
    return {**os.environ, **stack.environment("engine")}


def service_config() -> dict[str, Any]:
    """The engine service's instance config, its references resolved in its environment."""
    [path] = engine_configs("engine").values()
    return resolve_references(load_config_file(path), env=stack.environment("engine"))


def test_the_compose_file_parses_into_the_stack_services_with_known_keys() -> None:
    data = stack.compose()
    assert set(data) <= {"name", "services", "volumes"}
    services = stack.services()
    assert set(services) == SERVICES
    for name, service in services.items():
        assert set(service) <= SERVICE_KEYS, f"{name}: {set(service) - SERVICE_KEYS}"
        assert ("image" in service) or ("build" in service), name
        for dependency in service.get("depends_on") or {}:
            assert dependency in services, f"{name} depends on {dependency}, which is no service"
            assert "healthcheck" in services[dependency], f"{name} waits for {dependency}'s health, it has no check"
    named_volumes = {mount.source for name in services for mount in stack.mounts(name) if not mount.bind}
    assert named_volumes == set(data["volumes"])


def test_a_variable_without_a_default_is_refused() -> None:
    assert stack.interpolate("127.0.0.1:${PORT:-5432}:5432 $$HOME") == "127.0.0.1:5432:5432 $HOME"
    with pytest.raises(stack.StackError, match="PORT"):
        stack.interpolate("${PORT}")


def pulled_images() -> list[tuple[str, str]]:
    """Every image the stack pulls, with where it is named."""
    images = []
    for name, service in stack.services().items():
        if "build" not in service:
            images.append((f"compose.yaml: {name}", service["image"]))
    for dockerfile in DOCKERFILES:
        images += [(str(dockerfile.relative_to(stack.ROOT)), image) for image in stack.base_images(dockerfile)]
    return images


def pinned(image: str) -> bool:
    repository, _, tag = image.rpartition(":")
    if "@sha256:" in image:
        return True
    if not repository or "/" in tag:
        return False  # no tag: Docker would pull :latest
    parts = RELEASE_PARTS.get(repository.rsplit("/", 1)[-1], 3)
    return re.match(r"\d+" + r"\.\d+" * (parts - 1) + r"(?![.\d])", tag) is not None


def test_every_image_is_pinned_to_an_exact_release() -> None:
    images = pulled_images()
    assert len(images) == 9  # postgres, mariadb, kafka; maven, kafka (connect); python; maven, temurin, airflow
    loose = [(where, image) for where, image in images if not pinned(image)]
    assert not loose, f"not pinned to an exact release: {loose}"


@pytest.mark.parametrize(
    ("image", "exact"),
    [
        ("postgres:17.11", True),
        ("postgres:17", False),
        ("mariadb:11.4.12", True),
        ("mariadb:11.4", False),
        ("mariadb:latest", False),
        ("mariadb", False),
        ("apache/kafka:4.3.1", True),
        ("localhost:5000/kafka", False),
        ("apache/airflow:3.3.2-python3.11", True),
        ("apache/airflow:slim-3.3.2", False),
        ("eclipse-temurin:17.0.20_8-jre-noble", True),
        ("eclipse-temurin:17-jre", False),
    ],
)
def test_what_counts_as_pinned(image: str, exact: bool) -> None:
    assert pinned(image) is exact


def test_the_images_run_the_versions_the_project_pins() -> None:
    kafka = stack.pom_property("kafka.version")
    assert stack.services()["kafka"]["image"] == f"apache/kafka:{kafka}"
    assert stack.base_images(stack.DOCKER / "connect" / "Dockerfile")[-1] == f"apache/kafka:{kafka}"
    airflow_dockerfile = stack.DOCKER / "airflow" / "Dockerfile"
    airflow = stack.build_arg_default(airflow_dockerfile, "AIRFLOW_VERSION")
    assert airflow == version("apache-airflow"), "the image's Airflow is not the one the package is tested with"
    minimum = re.fullmatch(r">=(\d+\.\d+)", _requires_python())
    assert minimum, "requires-python is not a plain minimum"
    assert stack.base_images(airflow_dockerfile)[-1] == f"apache/airflow:{airflow}-python{minimum.group(1)}"


def _requires_python() -> str:
    text = (stack.ROOT / "pyproject.toml").read_text()
    found = re.search(r'^requires-python = "([^"]+)"', text, re.MULTILINE)
    assert found
    return found.group(1)


def test_every_file_the_stack_mounts_or_builds_from_exists() -> None:
    for name in stack.services():
        for mount in stack.mounts(name):
            if not mount.bind:
                continue
            # A missing source would be created by Docker as an empty directory.
            assert mount.host_path.exists(), f"{name}: {mount.source} does not exist"
            is_file = Path(mount.target).suffix != ""
            assert mount.host_path.is_file() == is_file, f"{name}: {mount.source} -> {mount.target}"
            assert mount.read_only or not is_file, f"{name}: the repository's {mount.source} is mounted writable"
        build = stack.services()[name].get("build")
        if build:
            context = (stack.DOCKER / build["context"]).resolve()
            assert (context / build["dockerfile"]).is_file(), f"{name}: no {build['dockerfile']} in {context}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_what_a_dockerfile_copies_exists_and_reaches_the_build_context(dockerfile: Path) -> None:
    [build] = [
        s["build"]
        for s in stack.services().values()
        if "build" in s and (stack.DOCKER / s["build"]["context"] / s["build"]["dockerfile"]).resolve() == dockerfile
    ]
    context = (stack.DOCKER / build["context"]).resolve()
    rules = stack.dockerignore(dockerfile)
    copied = stack.copied_from_context(dockerfile)
    assert copied
    for source in copied:
        files = list(stack.files_under(context, source))
        assert files, f"{dockerfile}: COPY {source}: nothing there"
        left_out = [f for f in files if stack.ignored(rules, f)]
        assert not left_out, f"{dockerfile}: COPY {source}: its .dockerignore leaves out {left_out[:5]}"
    for heavy in (".venv/bin/python", ".jars/kafka/x.jar", ".git/HEAD", "tests/conftest.py", "dags/x.py"):
        assert stack.ignored(rules, heavy), f"{dockerfile}: the build context would carry {heavy}"


def test_the_dockerignore_matcher() -> None:
    rules = ["*", "!jvm/", "!docker/connect/worker.properties", "jvm/**/target", "**/__pycache__"]
    assert not stack.ignored(rules, "jvm/pom.xml")
    assert not stack.ignored(rules, "jvm/spark/pom.xml")
    assert stack.ignored(rules, "jvm/spark/target/x.jar")
    assert not stack.ignored(rules, "docker/connect/worker.properties")
    assert stack.ignored(rules, "docker/connect/Dockerfile")
    assert stack.ignored(rules, "README.md")
    assert stack.ignored([*rules, "!jvm/x/__pycache__"], "jvm/y/__pycache__/a.pyc")


def test_published_ports_are_unique_and_on_loopback_only() -> None:
    published: dict[str, str] = {}
    for name, service in stack.services().items():
        for entry in service.get("ports") or []:
            host, port, container = str(entry).split(":")
            assert host == "127.0.0.1", f"{name} publishes {entry} beyond this machine"
            assert container.isdigit() and port.isdigit(), entry
            assert port not in published, f"{name} and {published.get(port)} both publish {port}"
            published[port] = name
    assert set(published.values()) == SERVICES


def dag_connection_ids() -> set[str]:
    """Every connection id the example DAGs name (their ``*_CONN`` constants)."""
    ids = set()
    for path in (stack.ROOT / "dags").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.endswith("_CONN") for n in names):
                    ids.add(str(node.value.value))
    return ids


def test_the_connections_are_json_and_are_the_ones_the_example_dags_use() -> None:
    connections = stack.connections()
    assert dag_connection_ids() == {
        *("cdc_shop", "cdc_shop_batch", "pg_shop", "pg_shop_replica"),
        *("cdc_mariadb", "mariadb_shop", "mariadb_shop_replica", "spark_cdc"),
    }
    assert set(connections) == dag_connection_ids()
    for conn_id, conn in connections.items():
        assert conn["conn_type"] in ("cdc_engine", "postgres", "mysql", "spark"), conn_id


def test_the_engine_connections_name_their_mounted_config_files_and_instances() -> None:
    configs = engine_configs("airflow")
    engines = {i: c for i, c in stack.connections().items() if c["conn_type"] == "cdc_engine"}
    embedded = {i: c for i, c in engines.items() if "config_path" in c.get("extra", {})}
    assert {c["extra"]["config_path"] for c in embedded.values()} == set(configs)
    for conn_id, conn in embedded.items():
        config = load_config_file(configs[conn["extra"]["config_path"]])
        # CdcStartEngineOperator refuses a connection whose login is not the file's instance.
        assert conn["login"] == config["name"], conn_id
        assert "password" not in conn and "host" not in conn  # the hook reads the token the instance generates


def test_the_engine_service_connection_reaches_its_api_with_its_token_and_ca() -> None:
    """cdc_shop names the engine service by URL only: its host and port are the service's API,
    its password the service's token, its CA the one the service makes its certificate with,
    in a volume both containers mount."""
    [(conn_id, conn)] = [
        (i, c) for i, c in stack.connections().items() if c["conn_type"] == "cdc_engine" and "host" in c
    ]
    config = service_config()
    assert conn_id == "cdc_shop" and conn["login"] == config["name"]
    assert "config_path" not in conn["extra"]
    assert conn["host"] == f"https://engine:{config['api.port']}"
    assert config["api.host"] == "0.0.0.0" and config["api.ssl.certfile"] and config["api.ssl.keyfile"]
    assert conn["password"] == config["api.token"] == stack.environment("engine")["CDC_ENGINE_TOKEN"]
    tls_dir = str(Path(config["api.ssl.certfile"]).parent)
    [tls_volume] = [m.source for m in stack.mounts("engine") if m.target == tls_dir and not m.bind]
    [airflow_tls] = [m for m in stack.mounts("airflow") if m.source == tls_volume]
    assert airflow_tls.read_only and conn["extra"]["ssl_ca"] == f"{airflow_tls.target}/ca.crt"
    command = " ".join(stack.services()["engine"]["command"])
    assert f"--dir {tls_dir} --server engine" in command  # the certificate is for the name the URL uses
    assert "engine serve --config /etc/airflow-cdc/engine.yaml" in command
    [published] = stack.services()["engine"]["ports"]
    assert published.endswith(f":{config['api.port']}")
    assert stack.services()["airflow"]["depends_on"]["engine"] == {"condition": "service_healthy"}


def test_the_source_connections_reach_the_services_and_databases_of_the_stack() -> None:
    connections = stack.connections()
    postgres, mariadb = stack.environment("postgres"), stack.environment("mariadb")
    for conn_id in ("pg_shop", "pg_shop_replica"):
        conn = connections[conn_id]
        assert conn["host"] == "postgres" and conn["port"] == 5432, conn_id
    assert connections["pg_shop"]["schema"] == postgres["POSTGRES_DB"]
    assert (connections["mariadb_shop"]["host"], connections["mariadb_shop"]["port"]) == ("mariadb", 3306)
    assert connections["mariadb_shop"]["schema"] == mariadb["MARIADB_DATABASE"]
    assert connections["mariadb_shop_replica"]["host"] == "mariadb"
    # Each instance's file agrees with the source connection its DAG starts it with.
    sources = {"postgres": connections["pg_shop"], "mariadb": connections["mariadb_shop"]}
    for path in engine_configs().values():
        config = load_config_file(path)
        kind = "mariadb" if "mariadb" in str(config["connector.class"]).lower() else "postgres"
        source = sources[kind]
        assert (config["database.hostname"], config["database.port"]) == (source["host"], source["port"]), path
        assert config["database.user"] == source["login"], path
        database = config.get("database.dbname") or config.get("database.include.list")
        assert database == source["schema"], path
        written = {key: value for key, value in config.items() if "password" in key or "token" in key}
        assert all(str(v).startswith("${env:") for v in written.values()), f"{path} holds a secret: {written}"


@pytest.mark.parametrize("path", sorted(engine_configs().values()), ids=lambda p: p.name)
def test_a_mounted_engine_config_passes_airflow_cdc_engine_check(path: Path) -> None:
    checked = subprocess.run(
        [str(CLI), "engine", "check", "--strict", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=engine_env(),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "configuration OK", checked.stdout  # and no warning


def test_engine_check_fails_on_a_config_it_should_refuse(tmp_path: Path) -> None:
    """The check above can fail: the same file with one misspelt key and one bad value."""
    text = next(iter(engine_configs().values())).read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("slot.name:", "slot.nmae:").replace("snapshot.mode: ", "snapshot.mode: sometimes #"))
    checked = subprocess.run(
        [str(CLI), "engine", "check", "--strict", "--config", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        env=engine_env(),
    )
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "slot.nmae" in checked.stderr and "snapshot.mode" in checked.stderr


def kafka_internal_address() -> str:
    """The address the kafka service advertises to the other containers."""
    env = stack.environment("kafka")
    listeners = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] in listeners
    return listeners[env["KAFKA_INTER_BROKER_LISTENER_NAME"]]


def test_the_kafka_listeners_fit_together() -> None:
    env = stack.environment("kafka")
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) == set(protocols)
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert set(advertised) <= set(listeners) and env["KAFKA_CONTROLLER_LISTENER_NAMES"] not in advertised
    for name, address in advertised.items():
        assert address.rsplit(":", 1)[1] == listeners[name].rsplit(":", 1)[1], name
    node, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert node == env["KAFKA_NODE_ID"]
    assert voter.rsplit(":", 1)[1] == listeners[env["KAFKA_CONTROLLER_LISTENER_NAMES"]].rsplit(":", 1)[1]
    [published] = stack.services()["kafka"]["ports"]
    assert published.split(":")[1] == advertised["HOST"].rsplit(":", 1)[1]
    assert kafka_internal_address() == "kafka:9092"


def test_the_engine_instances_write_to_the_stack_and_keep_apart() -> None:
    configs = []
    for service, volume in (("airflow", "cdc"), ("engine", "engine-state")):
        state_volume = next(m.target for m in stack.mounts(service) if m.source == volume)
        for path in engine_configs(service).values():
            config = load_config_file(path)
            assert Path(config["state.dir"]).is_relative_to(state_volume), config["name"]
            configs.append(config)
        if config.get("sink.type") == "kafka":
            assert config["sink.kafka.producer.bootstrap.servers"] == kafka_internal_address()
    for key in ("name", "slot.name", "database.server.id", "state.dir", "topic.prefix"):
        values = [c[key] for c in configs if key in c]  # slots are PostgreSQL's, server ids MySQL's
        assert len(set(values)) == len(values), f"the instances share {key}: {values}"


def connector(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert set(data) == {"name", "config"}, path  # the body of POST /connectors
    return data


def test_the_connect_worker_and_the_connector_configs_agree() -> None:
    worker = stack.java_properties(stack.DOCKER / "connect" / "worker.properties")
    assert worker["bootstrap.servers"] == kafka_internal_address()
    dockerfile = stack.instructions(stack.DOCKER / "connect" / "Dockerfile")
    plugins = [i.arguments.split()[-1] for i in dockerfile if i.keyword == "COPY" and "connect-plugins" in i.arguments]
    assert plugins == [worker["plugin.path"]]
    [config_copy] = [i for i in dockerfile if i.keyword == "COPY" and "worker.properties" in i.arguments]
    [cmd] = [i for i in dockerfile if i.keyword == "CMD"]
    assert json.loads(cmd.arguments)[-1] == config_copy.arguments.split()[-1]
    published = stack.services()["connect"]["ports"][0].split(":")[-1]
    assert worker["listeners"].rsplit(":", 1)[1] == published
    env = stack.environment("connect")
    providers = worker["config.providers"].split(",")
    names = [c["name"] for c in map(connector, stack.connector_files())]
    assert len(set(names)) == len(names) == 2
    for path in stack.connector_files():
        config = connector(path)["config"]
        for key, value in config.items():
            for provider, variable in re.findall(r"\$\{(\w+):(\w+)\}", value):
                assert provider in providers, f"{path.name}: {key} uses provider {provider!r}"
                assert variable in env, f"{path.name}: {key} reads ${variable}, which the connect service lacks"
        assert config["database.hostname"] in stack.services(), path.name
        history = config.get("schema.history.internal.kafka.bootstrap.servers")
        assert history in (None, kafka_internal_address()), path.name


def test_the_debezium_postgres_connector_is_the_engine_config_on_kafka_connect() -> None:
    """Same keys, same values: moving the capture to Debezium changes the slot, nothing else
    (each capture needs a slot of its own). The connector's config is also one the engine
    accepts as it is, unknown keys refused."""
    config = connector(stack.DOCKER / "connect" / "shop-postgres.json")["config"]
    engine = load_config_file(stack.mounted_file("engine", "/etc/airflow-cdc/engine.yaml"))
    shared = (set(config) & set(engine)) - {"slot.name"}
    assert {"connector.class", "topic.prefix", "table.include.list", "signal.data.collection"} <= shared
    differing = {key: (config[key], engine[key]) for key in shared if str(config[key]) != str(engine[key])}
    assert not differing
    assert config["slot.name"] != engine["slot.name"]
    engine_only = {"name", "state.dir", "sink.type", "sink.kafka.producer.bootstrap.servers"}
    engine_only |= {key for key in engine if key.startswith("api.")}
    assert set(engine) - set(config) <= engine_only | {"slot.drop.on.stop", "offset.flush.interval.ms"}
    as_instance = {**config, "name": "shop", "state.dir": "/tmp/shop", "database.password": "x", "sink.type": "null"}
    assert validated(as_instance, strict=True).warnings == ()
