"""Validating a whole configuration apart from any engine: typed settings or every problem once,
unknown keys flagged with the nearest known one (an error with config.strict), and the keys that
legitimately pass through left alone."""

from __future__ import annotations

import logging

import pytest

from airflow_cdc.cli import main
from airflow_cdc.engine import ConfigError, Engine
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import check, validated
from airflow_cdc.engine.sources.postgres.connector import PostgresConnector
from airflow_cdc.engine.validation import validate_config

from .scripted import ScriptedConnector, config

POSTGRES = {
    "name": "shop",
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "topic.prefix": "shop",
    "database.dbname": "shop",
    "offset.storage": "memory",
}


def keys(problems) -> list[str]:
    return [p.key for p in problems]


def test_a_valid_configuration_gives_every_parts_typed_settings_without_an_engine():
    result = validate_config({**POSTGRES, "max.batch.size": "512", "slot.drop.on.stop": "true"})
    assert result.name == "shop"
    assert result.engine["max.batch.size"] == 512
    assert result.connector_settings["slot.drop.on.stop"] is True
    assert isinstance(result.connector, PostgresConnector)
    assert result.warnings == ()


def test_a_misspelt_key_is_a_warning_naming_the_nearest_known_key():
    result = validate_config({**POSTGRES, "tabel.include.list": "public.orders"})
    (warning,) = result.warnings
    assert warning.key == "tabel.include.list"
    assert "ignored" in warning.message
    assert warning.fix == "did you mean table.include.list?"


def test_strict_mode_makes_an_unknown_key_an_error_by_config_key_or_argument():
    props = {**POSTGRES, "tabel.include.list": "public.orders"}
    with pytest.raises(ConfigError) as by_key:
        validate_config({**props, "config.strict": "true"})
    assert keys(by_key.value.problems) == ["tabel.include.list"]
    assert "refused (config.strict)" in by_key.value.problems[0].message
    with pytest.raises(ConfigError):
        validate_config(props, strict=True)
    assert validate_config({**props, "config.strict": "true"}, strict=False).warnings


def test_keys_that_pass_through_or_are_declared_elsewhere_are_not_flagged():
    props = {
        **POSTGRES,
        "offset.storage": "jdbc",
        "offset.storage.jdbc.connection.url": "jdbc:postgresql://localhost:5432/cdc",  # Debezium 3's name
        "offset.storage.jdbc.connection.user": "cdc",
        "sink.type": "kafka",
        "sink.kafka.producer.bootstrap.servers": "localhost:9092",
        "sink.kafka.producer.linger.ms": 20,
        "sink.changelog.fsync": "false",  # another sink's key: declared, unused
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.drop.tombstones": "false",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "api.port": 0,
        "state.dir": "/tmp/nowhere",
        "signal.data.collection": "public.debezium_signal",
        "incremental.snapshot.chunk.size": 2048,
    }
    assert validated(props).warnings == ()


def test_without_the_sink_and_instance_their_keys_are_unknown_to_a_bare_engine():
    result = validate_config({**POSTGRES, "sink.type": "kafka"})
    assert keys(result.warnings) == ["sink.type"]


def test_a_problem_of_a_key_two_parts_declare_is_listed_once():
    problems = check({**POSTGRES, "max.batch.size": "abc", "poll.interval.ms": "-5"})
    assert sorted(keys(problems)) == ["max.batch.size", "poll.interval.ms"]


def test_an_invalid_configuration_reports_its_unknown_keys_too():
    with pytest.raises(ConfigError) as error:
        validate_config({**POSTGRES, "max.batch.size": "abc", "tabel.include.list": "x"})
    assert keys(error.value.problems) == ["max.batch.size"]
    assert keys(error.value.warnings) == ["tabel.include.list"]


def test_the_engine_logs_each_warning_once(caplog):
    caplog.set_level(logging.WARNING, logger="airflow_cdc.engine.engine")
    Engine(config(**{"max_queue_sise": 10}), consumer=print, connector=ScriptedConnector())
    (record,) = [r for r in caplog.records if "max.queue.sise" in r.getMessage()]
    assert "did you mean max.queue.size?" in record.getMessage()


def test_an_instance_validates_once_and_its_engine_warns_once(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    props = {
        "name": "syn",
        "connector.class": "synthetic",
        "sink.type": "null",
        "state.dir": str(tmp_path),
        "synthetic.rat": 10,
    }
    instance = EngineInstance(props)
    assert instance.engine.validated.components["instance"]["api.enabled"] is True
    assert sum("synthetic.rat " in r.getMessage() for r in caplog.records) == 1


def test_a_validated_config_brings_its_connector():
    with pytest.raises(TypeError, match="brings its connector"):
        Engine(validate_config(POSTGRES), consumer=print, connector=PostgresConnector())


def test_engine_check_shows_warnings_and_strict_refuses(tmp_path, capsys):
    path = tmp_path / "engine.yaml"
    path.write_text(
        "name: shop\nconnector.class: postgres\ntopic.prefix: shop\ndatabase.dbname: shop\n"
        f"state.dir: {tmp_path}\ntabel.include.list: public.orders\n"
    )
    assert main(["engine", "check", "--config", str(path)]) == 0
    out = capsys.readouterr()
    assert "configuration OK (1 warning(s))" in out.out
    assert "warning: tabel.include.list" in out.err and "did you mean table.include.list?" in out.err
    assert main(["engine", "check", "--strict", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("tabel.include.list") == 1 and "refused (config.strict)" in err
