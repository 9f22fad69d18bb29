"""Every include/exclude list the sources read as regular expressions is compiled when the
configuration is checked: a broken pattern is a ConfigProblem naming the key, the pattern and
re's reason (it used to pass ``engine check`` and fail at start with a bare re.error)."""

from __future__ import annotations

import re

import pytest

from airflow_cdc.cli import main
from airflow_cdc.engine import ConfigError
from airflow_cdc.engine.validation import validate_config

BASE = {"name": "shop", "topic.prefix": "shop", "offset.storage": "memory"}
POSTGRES_LISTS = (
    "table.include.list",
    "table.exclude.list",
    "column.exclude.list",
    "message.prefix.include.list",
    "message.prefix.exclude.list",
)
MYSQL_LISTS = ("database.include.list", "database.exclude.list", "table.include.list", "table.exclude.list")
CASES = [("postgres", key) for key in POSTGRES_LISTS] + [
    (kind, key) for kind in ("mysql", "mariadb") for key in MYSQL_LISTS
]


def reason(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    raise AssertionError(f"{pattern!r} compiles")


@pytest.mark.parametrize(("connector", "key"), CASES)
def test_a_pattern_that_does_not_compile_is_a_problem_naming_key_pattern_and_reason(connector: str, key: str) -> None:
    with pytest.raises(ConfigError) as invalid:
        validate_config({**BASE, "connector.class": connector, key: r"shop\.orders, shop.(customers"})
    (problem,) = invalid.value.problems
    assert problem.key == key
    assert problem.message == f"'shop.(customers' is not a valid regular expression: {reason('shop.(customers')}"
    assert "regular expressions matched against whole names" in problem.fix


def test_every_broken_pattern_of_a_list_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as invalid:
        validate_config({**BASE, "connector.class": "postgres", "table.include.list": "a[b,c)d,public\\.ok"})
    (problem,) = invalid.value.problems
    assert "'a[b' is not a valid regular expression" in problem.message
    assert "'c)d' is not a valid regular expression" in problem.message
    assert "public" not in problem.message


def test_valid_patterns_pass_and_stay_the_strings_given() -> None:
    result = validate_config(
        {**BASE, "connector.class": "mariadb", "table.include.list": r"shop\.orders, shop\.(customers|items)"}
    )
    assert result.connector_settings["table.include.list"] == [r"shop\.orders", r"shop\.(customers|items)"]


def test_engine_check_refuses_a_broken_pattern(tmp_path, capsys) -> None:
    path = tmp_path / "engine.yaml"
    path.write_text(
        "name: shop\nconnector.class: mariadb\ntopic.prefix: shop\n"
        f"state.dir: {tmp_path}\ndatabase.include.list: 'shop[0-9'\n"
    )
    assert main(["engine", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "database.include.list: 'shop[0-9' is not a valid regular expression: unterminated character set" in err
