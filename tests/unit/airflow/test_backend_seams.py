"""The Airflow layer drives engines only through ``airflow_cdc.backends`` (ADR 0022): operators,
sensors, triggers and the UI import neither the engine's server package nor the Kafka Connect
backend, no module outside the backends names a backend class, and none of them branches on
which backend a connection drives."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import airflow_cdc
from airflow_cdc.backends import api as shared
from airflow_cdc.backends import connect, local, service

PACKAGE = Path(airflow_cdc.__file__).parent
AIRFLOW_LAYER = ("operators", "sensors", "triggers", "ui")
FORBIDDEN = ("airflow_cdc.engine.server", "airflow_cdc.kafka_connect")
BACKEND_CLASSES = {
    name
    for module in (connect, local, service, shared)
    for name, value in vars(module).items()
    if isinstance(value, type) and value.__module__ == module.__name__
}
#: What backend branching looked like: a connection's kind, a client's class, or sniffing for a
#: method (a missing one silently turned the offset trigger's flush off).
BRANCHING = re.compile(
    r"\.kafka_connect\b|settings\.config_path|isinstance\([^)]*(Client|Backend)\b|getattr\((client|backend)\b"
)


def _modules(*parts: str) -> list[Path]:
    return sorted(p for part in parts for p in (PACKAGE / part).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_airflow_layer_imports_no_backend_internals() -> None:
    offending = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in _modules(*AIRFLOW_LAYER)
        for name in _imports(path)
        if name.startswith(FORBIDDEN)
    }
    assert not offending, sorted(offending)


def test_no_module_outside_the_backends_names_a_backend_class() -> None:
    assert {"LocalInstanceBackend", "ServiceBackend", "ConnectorBackend"} <= BACKEND_CLASSES
    pattern = re.compile(r"\b(" + "|".join(sorted(BACKEND_CLASSES)) + r")\b")
    offending = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path in PACKAGE.rglob("*.py")
        if "backends" not in path.relative_to(PACKAGE).parts
        for match in pattern.finditer(path.read_text())
    ]
    assert not offending, offending


def test_operators_sensors_triggers_and_the_ui_do_not_branch_on_the_backend() -> None:
    offending = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in _modules(*AIRFLOW_LAYER)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCHING.search(line) and not line.lstrip().startswith("#")
    ]
    assert not offending, offending
