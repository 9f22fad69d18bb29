"""deploy/kubernetes/engine.yaml as far as it can be checked without a cluster: the pieces name
each other (selector, Service, ports, volumes, the Secret keys the config reads), the engine runs
as the image's user with the API on TLS, one replica replaced with Recreate, its state on the
volume, and the config file is one ``airflow-cdc engine check --strict`` accepts. The engine run
on what the pod sees is in tests/integration/test_kubernetes_engine.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.config_file import flatten
from airflow_cdc.engine.server.config_providers import resolve_references
from airflow_cdc.engine.server.instance_files import validated
from tests.unit.deploy import manifests
from tests.unit.docker import stack


def config() -> dict[str, object]:
    return flatten(yaml.safe_load(manifests.config_text()))


def test_the_manifests_are_the_engines_pieces_and_name_each_other() -> None:
    docs = manifests.documents()
    assert set(docs) == {"ConfigMap", "PersistentVolumeClaim", "Deployment", "Service"}
    assert "Secret" not in docs  # created with kubectl or a secret manager: never a secret in git
    deployment, service = docs["Deployment"], docs["Service"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    [port] = service["spec"]["ports"]
    [container_port] = manifests.container()["ports"]
    assert port["targetPort"] == container_port["name"]
    assert port["port"] == container_port["containerPort"] == config()["api.port"]
    claims = [
        m.volume["persistentVolumeClaim"]["claimName"]
        for m in manifests.mounts()
        if "persistentVolumeClaim" in m.volume
    ]
    assert claims == [docs["PersistentVolumeClaim"]["metadata"]["name"]]
    assert manifests.pod()["volumes"] and all(
        m.volume["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
        for m in manifests.mounts()
        if "configMap" in m.volume
    )


def test_one_engine_at_a_time_with_time_to_drain() -> None:
    spec = manifests.documents()["Deployment"]["spec"]
    # Two pods on one slot and one offset store would fight: never a rolling update's overlap.
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert manifests.pod()["terminationGracePeriodSeconds"] >= 60


def test_it_runs_as_the_images_user_with_a_read_only_root() -> None:
    dockerfile = stack.instructions(stack.DOCKER / "engine" / "Dockerfile")
    [user] = [i.arguments for i in dockerfile if i.keyword == "USER"]
    security = manifests.pod()["securityContext"]
    assert security["runAsNonRoot"] is True and str(security["runAsUser"]) == user
    container = manifests.container()["securityContext"]
    assert container["readOnlyRootFilesystem"] is True and container["allowPrivilegeEscalation"] is False
    writable = [
        m.mount_path for m in manifests.mounts() if "persistentVolumeClaim" in m.volume or "emptyDir" in m.volume
    ]
    assert Path(str(config()["state.dir"])).is_relative_to(next(p for p in writable if p != "/tmp"))
    assert "/tmp" in writable  # Python's and the libraries' temporary files


def test_the_image_is_the_engine_image_at_the_packages_version() -> None:
    version = re.search(r'^version = "([^"]+)"', (stack.ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert version
    assert manifests.container()["image"] == f"airflow-cdc/engine:{version.group(1)}"
    dockerfile = stack.instructions(stack.DOCKER / "engine" / "Dockerfile")
    [entrypoint] = [i.arguments for i in dockerfile if i.keyword == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == ["airflow-cdc", "engine", "serve"]
    assert manifests.container()["args"][0] == "--config" and "command" not in manifests.container()


def test_every_secret_the_config_reads_is_given_to_the_pod() -> None:
    text = manifests.config_text()
    env = {e["name"]: e for e in manifests.container().get("env", [])}
    for name in manifests.ENV_REFERENCE.findall(text):
        assert name in env, f"${{env:{name}}}: the container has no {name}"
        assert "secretKeyRef" in env[name]["valueFrom"], f"{name} is no Secret's key"
    secret_mounts = {m.mount_path: m.volume["secret"] for m in manifests.mounts() if "secret" in m.volume}
    for directory, key in manifests.DIRECTORY_REFERENCE.findall(text):
        assert directory in secret_mounts, f"${{directory:{directory}:{key}}}: no Secret mounted there"
        items = secret_mounts[directory].get("items")
        assert items is None or key in [i["path"] for i in items], f"{key} is not among {directory}'s files"
    for key in ("database.password", "api.token"):
        assert str(config()[key]).startswith("${"), f"{key} is written in the ConfigMap"


def test_the_api_is_served_over_tls_and_probed_there() -> None:
    settings = config()
    assert settings["api.host"] == "0.0.0.0"
    secret_mounts = {m.mount_path: m.volume["secret"] for m in manifests.mounts() if "secret" in m.volume}
    for key in ("api.ssl.certfile", "api.ssl.keyfile"):
        path = Path(str(settings[key]))
        assert str(path.parent) in secret_mounts and path.name in ("tls.crt", "tls.key"), key  # kubernetes.io/tls
    for probe in ("readinessProbe", "livenessProbe"):
        http = manifests.container()[probe]["httpGet"]
        assert (http["path"], http["port"], http["scheme"]) == ("/health", "api", "HTTPS"), probe
    # Readable by the engine's user only through its group (fsGroup 0), by no one else.
    for secret in secret_mounts.values():
        assert secret["defaultMode"] == 0o440


@pytest.mark.parametrize("resolvable", [True, False], ids=["with-secrets", "without"])
def test_the_config_passes_the_engine_check(resolvable: bool, tmp_path: Path) -> None:
    """As the pod sees it (its Secret as files and environment), it is valid with no unknown key;
    without the Secret the check names what is missing."""
    (tmp_path / "api-token").write_text("token\n")
    settings = {
        key: value.replace("/etc/airflow-cdc/secret", str(tmp_path)) if isinstance(value, str) else value
        for key, value in config().items()
    }
    env = {"CDC_DATABASE_PASSWORD": "pw"} if resolvable else {}
    if resolvable:
        resolved = resolve_references(settings, env=env)
        assert resolved["api.token"] == "token" and resolved["database.password"] == "pw"
        assert validated(resolved, strict=True).warnings == ()
    else:
        with pytest.raises(ConfigError, match="CDC_DATABASE_PASSWORD"):
            resolve_references(settings, env=env)
