"""Kafka Connect's config providers in an instance's configuration (its secrets from the
environment or from a mounted Secret, the file still usable on Connect)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.config_providers import resolve_references
from airflow_cdc.engine.server.instance_files import resolve


def test_env_directory_and_file_references_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_DB_PASSWORD", "from-env")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "api-token").write_text("from-volume\n")
    (tmp_path / "app.properties").write_text("db.user=cdc\n")
    props = {
        "database.password": "${env:CDC_DB_PASSWORD}",
        "api.token": f"${{directory:{tmp_path / 'secret'}:api-token}}",
        "database.user": f"${{file:{tmp_path / 'app.properties'}:db.user}}",
        "topic.prefix": "shop-${env:CDC_DB_PASSWORD}",
        "database.port": 5432,
    }
    assert resolve_references(props) == {
        "database.password": "from-env",
        "api.token": "from-volume",
        "database.user": "cdc",
        "topic.prefix": "shop-from-env",
        "database.port": 5432,
    }
    assert resolve({**props, "state.dir": str(tmp_path)})["database.password"] == "from-env"


def test_what_cannot_be_resolved_names_the_key_and_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_references(
            {
                "database.password": "${env:CDC_NO_SUCH_VARIABLE}",
                "api.token": f"${{directory:{tmp_path}:missing}}",
                "x": f"${{file:{tmp_path / 'none.properties'}:k}}",
            }
        )
    keys = {problem.key for problem in caught.value.problems}
    assert keys == {"database.password", "api.token", "x"}
    assert "no environment variable CDC_NO_SUCH_VARIABLE" in str(caught.value)
