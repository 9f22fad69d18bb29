"""Reading the docker stack without Docker: ``docker/compose.yaml`` as Compose reads it (variables
at their defaults), its services' environments and bind mounts, the Airflow connections it
defines, the Dockerfiles' base images and copied paths, and their ``.dockerignore`` rules.

Shared by ``tests/unit/docker`` and ``tests/integration/docker``; no test lives here.
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jproperties import Properties  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[3]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"

#: ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``; ``$$`` is a literal dollar.
_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}")


class StackError(AssertionError):
    """The stack's files say something Compose or Docker would refuse."""


def interpolate(value: Any) -> Any:
    """``value`` with Compose's variables replaced by their defaults: the stack must run without
    any variable set, so a variable without a default is an error."""
    if isinstance(value, dict):
        return {key: interpolate(item) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item) for item in value]
    if not isinstance(value, str):
        return value

    def default(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group("op") is None:
            raise StackError(f"${{{match.group('name')}}} has no default: the stack would need it set")
        return match.group("default")

    return _VARIABLE.sub(default, value)


def compose() -> dict[str, Any]:
    """The compose file as Compose reads it, variables at their defaults."""
    data = yaml.safe_load(COMPOSE.read_text())
    if not isinstance(data, dict):
        raise StackError(f"{COMPOSE} is not a mapping")
    return interpolate(data)


def services() -> dict[str, dict[str, Any]]:
    return dict(compose()["services"])


def environment(service: str) -> dict[str, str]:
    """A service's environment, from either of Compose's forms (mapping or ``NAME=value`` list)."""
    env = services()[service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def connections() -> dict[str, dict[str, Any]]:
    """The Airflow connections of the airflow service (``AIRFLOW_CONN_<ID>`` JSON), by conn id."""
    return {
        name.removeprefix("AIRFLOW_CONN_").lower(): json.loads(value)
        for name, value in environment("airflow").items()
        if name.startswith("AIRFLOW_CONN_")
    }


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool

    @property
    def bind(self) -> bool:
        """A path on the host (Compose: one starting with ``.``, ``/`` or ``~``), not a volume."""
        return self.source.startswith((".", "/", "~"))

    @property
    def host_path(self) -> Path:
        return (DOCKER / self.source).resolve()


def mounts(service: str) -> list[Mount]:
    """A service's volumes in Compose's short syntax (the stack uses no other)."""
    out = []
    for entry in services()[service].get("volumes") or []:
        if not isinstance(entry, str):
            raise StackError(f"{service}: use the short volume syntax, not {entry!r}")
        source, target, *mode = entry.split(":")
        out.append(Mount(source, target, mode == ["ro"]))
    return out


def mounted_file(service: str, target: str) -> Path:
    """The host file bind-mounted at ``target`` in ``service``."""
    for mount in mounts(service):
        if mount.bind and mount.target == target:
            return mount.host_path
    raise StackError(f"{service} mounts nothing at {target}")


# --- Dockerfiles ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def instructions(dockerfile: Path) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        out.append(Instruction(keyword.upper(), arguments.strip()))
        pending = ""
    return out


@dataclass(frozen=True)
class Stage:
    image: str
    name: str | None


def stages(dockerfile: Path) -> list[Stage]:
    """Every ``FROM``, with the ``ARG`` defaults declared before the first one substituted."""
    args: dict[str, str] = {}
    out: list[Stage] = []
    for instruction in instructions(dockerfile):
        if instruction.keyword == "ARG" and not out:
            name, _, value = instruction.arguments.partition("=")
            args[name] = value.strip('"')
        elif instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
            out.append(Stage(image, words[2] if len(words) == 3 and words[1].upper() == "AS" else None))
    return out


def base_images(dockerfile: Path) -> list[str]:
    """The images a build pulls: every ``FROM`` that is not an earlier stage of the same file."""
    names: set[str] = set()
    images = []
    for stage in stages(dockerfile):
        if stage.image not in names:
            images.append(stage.image)
        if stage.name:
            names.add(stage.name)
    return images


def build_arg_default(dockerfile: Path, name: str) -> str:
    for instruction in instructions(dockerfile):
        key, _, value = instruction.arguments.partition("=")
        if instruction.keyword == "ARG" and key == name and value:
            return value.strip('"')
    raise StackError(f"{dockerfile} declares no ARG {name} with a default")


def copied_from_context(dockerfile: Path) -> list[str]:
    """The sources of every ``COPY``/``ADD`` that reads the build context (not another stage)."""
    out = []
    for instruction in instructions(dockerfile):
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        words = shlex.split(instruction.arguments)
        if any(w.startswith("--from=") for w in words):
            continue
        out += [w for w in words if not w.startswith("--")][:-1]  # the last one is the destination
    return out


# --- .dockerignore ---------------------------------------------------------------------------------


def _pattern(text: str) -> re.Pattern[str]:
    parts = []
    for token in re.split(r"(\*\*/?|\*|\?)", text.strip("/")):
        if token.startswith("**"):
            parts.append("(?:.*/)?" if token.endswith("/") else ".*")
        elif token == "*":
            parts.append("[^/]*")
        elif token == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts))


def ignored(rules: list[str], path: str) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out of the build context: the
    last rule matching the path or one of its parent directories decides; ``!`` keeps."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for rule in rules:
        keep = rule.startswith("!")
        pattern = _pattern(rule.removeprefix("!"))
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            verdict = not keep
    return verdict


def dockerignore(dockerfile: Path) -> list[str]:
    """The rules of ``<Dockerfile>.dockerignore`` (BuildKit's per-Dockerfile ignore file)."""
    path = dockerfile.with_name(dockerfile.name + ".dockerignore")
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def files_under(root: Path, relative: str) -> Iterator[str]:
    """Every file at or under ``root/relative``, relative to ``root`` (caches left out)."""
    path = root / relative
    if path.is_file():
        yield relative
        return
    for file in sorted(path.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts:
            yield str(file.relative_to(root))


# --- the project's pins ----------------------------------------------------------------------------


def pom_property(name: str) -> str:
    """A property of ``jvm/pom.xml``, where the JVM parts' versions are pinned."""
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(ROOT / "jvm" / "pom.xml").getroot().find(f"m:properties/m:{name}", namespace)
    if found is None or not found.text:
        raise StackError(f"jvm/pom.xml has no property {name}")
    return found.text.strip()


def connector_files() -> list[Path]:
    return sorted((DOCKER / "connect").glob("*.json"))


def java_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file, read as Kafka reads it."""
    properties = Properties()
    properties.load(path.read_bytes(), "utf-8")
    return {key: value.data for key, value in properties.items()}
