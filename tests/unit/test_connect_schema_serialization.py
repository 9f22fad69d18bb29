"""The JSON serializer with the converters' schemas enabled (ADR 0024): each key and value as
JsonConverter writes them, ``{"schema": ..., "payload": ...}``; disabled, exactly as before."""

from __future__ import annotations

import orjson
import pytest

from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connect_schema import ConnectSchemas, envelope, field, schema, struct
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.serialization import JsonSerializer
from airflow_cdc.engine.sources.postgres.connect_schema import SOURCE
from airflow_cdc.engine.transforms import ExtractNewRecordState
from airflow_cdc.engine.validation import validate_config

KEY = struct("p.public.t.Key", [field("id", schema("int32"))])
VALUE = envelope("p.public.t", struct("p.public.t.Value", [field("id", schema("int32"))], optional=True), SOURCE)
SCHEMAS = ConnectSchemas.of(KEY, VALUE)


def _record(key: object, value: object, schemas: ConnectSchemas | None = SCHEMAS) -> SourceRecord:
    return SourceRecord("p.public.t", key, value, {"server": "p"}, {"lsn": 1}, schemas=schemas)


def test_schemas_enabled_wraps_key_and_value() -> None:
    serializer = JsonSerializer.from_config(
        {"key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
    )
    out = serializer.serialize(_record({"id": 1}, {"op": "c"}))
    assert orjson.loads(out.key) == {"schema": KEY, "payload": {"id": 1}}
    assert orjson.loads(out.value) == {"schema": VALUE, "payload": {"op": "c"}}
    assert SCHEMAS.key_schema == KEY and SCHEMAS.value_schema == VALUE


def test_value_schemas_only_and_records_without_schemas() -> None:
    serializer = JsonSerializer.from_config({"value.converter.schemas.enable": "true"})
    out = serializer.serialize(_record({"id": 1}, {"op": "c"}))
    assert orjson.loads(out.key) == {"id": 1}
    assert orjson.loads(out.value)["schema"] == VALUE
    # A record no source built a schema for: JsonConverter's null schema. A tombstone stays null.
    bare = serializer.serialize(_record(None, {"x": 1}, schemas=None))
    assert bare.key is None and orjson.loads(bare.value) == {"schema": None, "payload": {"x": 1}}
    assert serializer.serialize(_record({"id": 1}, None)).value is None


def test_schemas_disabled_by_default() -> None:
    out = JsonSerializer.from_config({}).serialize(_record({"id": 1}, {"op": "c"}))
    assert (out.key, out.value) == (b'{"id":1}', b'{"op":"c"}')


def test_mariadb_takes_the_schema_settings() -> None:
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "name": "x",
        "topic.prefix": "p",
        "offset.storage": "memory",
        "value.converter.schemas.enable": "true",
        "column.propagate.source.type": r"db\.t\..*",
        "datatype.propagate.source.type": r".+\.INT",
    }
    result = validate_config(config)
    assert result.warnings == ()
    assert result.connector_settings["column.propagate.source.type"] == [r"db\.t\..*"]


def test_unwrap_keeps_the_key_schema_and_gives_the_row_its_value_struct() -> None:
    unwrap = ExtractNewRecordState(Config({}))
    record = _record({"id": 1}, {"op": "c", "before": None, "after": {"id": 1}, "source": {}})
    out = JsonSerializer(key_schemas=True, value_schemas=True).serialize(unwrap.apply(record))
    row_schema = {k: v for k, v in VALUE["fields"][1].items() if k != "field"}
    assert orjson.loads(out.key)["schema"] == KEY
    assert orjson.loads(out.value) == {"schema": row_schema, "payload": {"id": 1}}
    # Fields added to the row are not described yet: no schema rather than one that does not fit.
    added = ExtractNewRecordState(Config({"add.fields": "op"})).apply(record)
    assert orjson.loads(JsonSerializer(value_schemas=True).serialize(added).value)["schema"] is None


def test_an_engine_refuses_a_serializer_that_writes_other_schemas_than_its_config_asks() -> None:
    """An embedding user's ``JsonSerializer()`` would write no schemas while the config enables
    them (and ``JsonSerializer(value_schemas=True)`` schemas no source builds): both refused."""
    from airflow_cdc.engine import Engine

    base = {"name": "s", "connector.class": "synthetic", "offset.storage": "memory"}
    enabled = {**base, "value.converter.schemas.enable": "true"}
    with pytest.raises(ConfigError, match=r"value\.converter\.schemas\.enable.*JsonSerializer\.from_config"):
        Engine(enabled, consumer=lambda record: None, serializer=JsonSerializer())
    with pytest.raises(ConfigError, match=r"JsonSerializer\.from_config"):
        Engine(base, consumer=lambda record: None, serializer=JsonSerializer(value_schemas=True))
    Engine(enabled, consumer=lambda record: None, serializer=JsonSerializer.from_config(enabled))
    Engine(base, consumer=lambda record: None, serializer=JsonSerializer())
