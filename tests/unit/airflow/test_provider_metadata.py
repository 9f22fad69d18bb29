"""The provider metadata: every module and class path it names imports, and Airflow's own CLI
(on a throwaway AIRFLOW_HOME) lists our hooks and extra links."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.provider_info import get_provider_info

SECTIONS = ("hooks", "operators", "sensors", "triggers")


def class_paths(info: dict[str, Any]) -> list[str]:
    paths = [c["hook-class-name"] for c in info.get("connection-types", [])]
    return paths + list(info.get("extra-links", []))


def test_every_module_and_class_the_metadata_names_imports() -> None:
    info = get_provider_info()
    modules = [m for section in SECTIONS for entry in info.get(section, []) for m in entry["python-modules"]]
    assert {"airflow_cdc.hooks.engine", "airflow_cdc.operators.engine", "airflow_cdc.operators.capture"} <= set(modules)
    for module in modules:
        importlib.import_module(module)
    for path in class_paths(info):
        module, _, name = path.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), path
    integrations = {i["integration-name"] for i in info["integrations"]}
    assert all(entry["integration-name"] in integrations for section in SECTIONS for entry in info.get(section, []))


def airflow_cli(home: Path, *args: str) -> Any:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "providers", *args, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AIRFLOW_HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout[done.stdout.index("[") :])


@pytest.mark.slow
def test_airflows_cli_lists_our_hooks_and_links(tmp_path: Path) -> None:
    hooks = {h["connection_type"]: h for h in airflow_cli(tmp_path, "hooks")}
    assert hooks["cdc_engine"]["class"] == "airflow_cdc.hooks.engine.CdcEngineHook"
    assert hooks["cdc_engine"]["package_name"] == "airflow-cdc"
    links = [link["extra_link_class_name"] for link in airflow_cli(tmp_path, "links")]
    assert "airflow_cdc.links.CdcInstanceLink" in links
    # The asset watchers' module (issue 29): `airflow providers triggers` names it.
    triggers = {t["class"] for t in airflow_cli(tmp_path, "triggers") if t["package_name"] == "airflow-cdc"}
    assert "airflow_cdc.triggers.table_changes" in triggers
