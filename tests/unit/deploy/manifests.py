"""Reading deploy/kubernetes without a cluster: the manifests by kind, and what the engine's pod
sees - its config file (from the ConfigMap), the files its Secrets mount and its environment -
so that tests can check them against each other and run the engine on them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "deploy" / "kubernetes" / "engine.yaml"
#: ``${env:NAME}`` and ``${directory:/path:KEY}`` references in a config file.
ENV_REFERENCE = re.compile(r"\$\{env:(\w+)\}")
DIRECTORY_REFERENCE = re.compile(r"\$\{directory:([^:}]+):([^}]+)\}")


def documents() -> dict[str, dict[str, Any]]:
    """The manifests by kind (one of each)."""
    out: dict[str, dict[str, Any]] = {}
    for doc in yaml.safe_load_all(ENGINE.read_text()):
        assert doc["kind"] not in out, f"two {doc['kind']}s"
        out[doc["kind"]] = doc
    return out


def pod() -> dict[str, Any]:
    return dict(documents()["Deployment"]["spec"]["template"]["spec"])


def container() -> dict[str, Any]:
    [engine] = pod()["containers"]
    return dict(engine)


@dataclass(frozen=True)
class Mounted:
    mount_path: str
    volume: dict[str, Any]


def mounts() -> list[Mounted]:
    volumes = {v["name"]: v for v in pod()["volumes"]}
    return [Mounted(m["mountPath"], volumes[m["name"]]) for m in container()["volumeMounts"]]


def config_path() -> tuple[str, str]:
    """``(path in the pod, ConfigMap key)`` of the file the engine is started with."""
    args = container()["args"]
    path = args[args.index("--config") + 1]
    for mounted in mounts():
        if "configMap" in mounted.volume and path.startswith(mounted.mount_path + "/"):
            return path, path.removeprefix(mounted.mount_path + "/")
    raise AssertionError(f"{path} is in no mounted ConfigMap")


def config_text() -> str:
    _, key = config_path()
    return str(documents()["ConfigMap"]["data"][key])
