"""A config file that does not parse is named by file, line and column and its problem, and the
error never shows the line (PyYAML's snippet) or a secret's text the parser quotes - also through
the CLI, which prints the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.cli import main
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.config_file import load_config_file


def error_of(path: Path, text: str | bytes) -> str:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(ConfigError) as caught:
        load_config_file(path)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no YAML error traceback
    return str(caught.value)


@pytest.mark.parametrize(
    ("text", "where", "secret"),
    [
        # an unquoted password that starts with * is an alias: "found undefined alias 'Secr3t!'"
        ("name: shop\ndatabase:\n  hostname: db\n  password: *Secr3t!\n", ":4:20:", "Secr3t!"),
        ("database.password: !hunter2 x\n", ":1:20:", "hunter2"),
        ("sasl.jaas.config: @org.apache.kafka x\n", ":1:19:", "'@'"),
        ("db: {user: app, password: *zz9}\n", ":1:27:", "zz9"),
        ("offset.storage.jdbc.url: jdbc:postgresql://app:*pw9@db/shop\n  bad: indent\n", ":2:6:", "pw9@db"),
    ],
)
def test_a_yaml_error_on_a_secrets_line_shows_neither_the_line_nor_the_secret(
    tmp_path: Path, text: str, where: str, secret: str
) -> None:
    message = error_of(tmp_path / "shop.yaml", text)
    assert f"{tmp_path / 'shop.yaml'}{where}" in message
    assert "not valid YAML" in message and "sets a secret" in message
    assert secret not in message
    assert "^" not in message and '"<byte string>"' not in message  # PyYAML's snippet and where it says it is


def test_a_yaml_error_elsewhere_says_what_the_parser_found_but_not_the_line(tmp_path: Path) -> None:
    message = error_of(tmp_path / "shop.yaml", "name: shop\ntable.include.list: [public.orders\n")
    assert f"{tmp_path / 'shop.yaml'}:3:1: not valid YAML: expected ',' or ']'" in message
    assert "(while parsing a flow sequence at 2:21)" in message
    assert "public.orders" not in message and "^" not in message
    message = error_of(tmp_path / "shop.yaml", "name: shop\n  topic.prefix: shop\n")
    assert ":2:15: not valid YAML: mapping values are not allowed here" in message
    assert "topic.prefix" not in message


def test_yaml_that_is_not_text(tmp_path: Path) -> None:
    message = error_of(tmp_path / "shop.yaml", b"database.password: \xff\xfepw\n")
    assert f"{tmp_path / 'shop.yaml'}: byte 19 is not YAML text: invalid start byte" in message
    assert "pw" not in message


def test_a_properties_error_names_the_line_without_the_escape(tmp_path: Path) -> None:
    message = error_of(tmp_path / "shop.properties", "name=shop\ndatabase.password=ab\\uzz9zcd\n")
    assert f"{tmp_path / 'shop.properties'}:2: a bad \\u escape" in message
    assert "zz9z" not in message
    message = error_of(tmp_path / "shop.properties", b"name=shop\ndatabase.password=\xffpw\n")
    assert f"{tmp_path / 'shop.properties'}:2: is not UTF-8 text" in message and "pw" not in message


def test_the_cli_prints_the_error_without_the_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text("name: shop\ndatabase.password: *Secr3t!\n")
    assert main(["engine", "check", "--config", str(path)]) != 0
    out = capsys.readouterr()
    assert f"{path}:2:27: not valid YAML" in out.err
    assert "Secr3t" not in out.out + out.err
