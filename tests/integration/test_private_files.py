"""What holds captured rows - the offsets file, the changelog, the instance's state directory - is
created readable by its owner only (files 0600, directories 0700) under a umask of 022 or 002,
and a stricter umask still applies. A real engine (the synthetic source) writes both."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.server.instance_files import ensure_api_token, is_running
from airflow_cdc.engine.sinks import build_sink
from airflow_cdc.engine.storage.file import atomic_write
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .test_changelog_sink import synthetic


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_offsets_and_changelog_are_private(tmp_path: Path, umask: int) -> None:
    state = tmp_path / "state"  # neither it nor its subdirectories exist yet
    offsets, changelog = state / "offsets" / "offsets.json", state / "changelog"
    sink = build_sink({"sink.type": "changelog", "sink.changelog.dir": str(changelog)})
    props = synthetic("private", 200, **{"offset.storage": "file", "offset.storage.file.filename": str(offsets)})
    with sink:
        engine = Engine(props, batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine) as runner:
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 200, 30, "all committed")
            runner.stop()
    segments = list(changelog.rglob("*.jsonl"))
    assert segments and offsets.exists()
    assert {mode(p) for p in [offsets, *segments]} == {0o600}
    directories = [state, offsets.parent, changelog, *(p for p in changelog.iterdir() if p.is_dir())]
    assert {mode(p) for p in directories} == {0o700}


def test_a_stricter_umask_still_applies(tmp_path: Path) -> None:
    old = os.umask(0o377)  # files: read-only for the owner; directories would be unusable, so none
    try:
        atomic_write(tmp_path / "offsets.json", b"{}")
    finally:
        os.umask(old)
    assert mode(tmp_path / "offsets.json") == 0o400


def test_an_existing_directory_keeps_its_mode(tmp_path: Path, umask: int) -> None:
    changelog = tmp_path / "changelog"
    changelog.mkdir(mode=0o750)
    changelog.chmod(0o750)  # the operator's choice, e.g. a reader in the group
    sink = build_sink({"sink.type": "changelog", "sink.changelog.dir": str(changelog)})
    with sink:
        engine = Engine(synthetic("kept", 20), batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine) as runner:
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 20, 30, "all committed")
            runner.stop()
    assert mode(changelog) == 0o750
    assert {mode(p) for p in changelog.iterdir()} == {0o700}  # the topics' directories it made


def test_the_instance_state_directory_and_its_files(tmp_path: Path, umask: int) -> None:
    state = tmp_path / "cdc" / "shop"
    assert not is_running(state)  # the first look creates the directory and its lock
    ensure_api_token({"api.token": "", "state.dir": str(state)})
    assert {mode(p) for p in (tmp_path / "cdc", state)} == {0o700}
    assert {mode(state / name) for name in ("instance.lock", "api.token")} == {0o600}
