"""The apply job's config groups: checked field by field with the field named, normalised as a
command line would be, the JSON document the job reads back; and the job's two ways in (one
``--config-json`` document, or the flags of a run by hand) giving the same run."""

from __future__ import annotations

import json

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.spark.apply import TARGET_URL_ENV, parse_args, parser
from airflow_cdc.spark.job_config import SOURCE_KINDS, ApplyConfig, JobConfigError, SubmitConfig
from airflow_cdc.spark.reading import SOURCES


def problems(build: object) -> dict[str, str]:
    with pytest.raises(JobConfigError) as failure:
        build()  # type: ignore[operator]
    return {p.key: p.message for p in failure.value.problems}


def test_the_groups_name_every_wrong_field_at_once() -> None:
    found = problems(
        lambda: ApplyConfig(
            source="kafka-java",
            topics=["ok", 3],
            lanes=0,
            max_records_per_batch=True,
            max_duration=-1,
            trigger="once",
            table_map={"a": {"nested": 1}},
            lane_groups=[["a"], []],
            target_url="http://nope",
        )
    )
    assert found == {
        "ApplyConfig.source": "unknown value 'kafka-java'",
        "ApplyConfig.topics": "takes names, got 3",
        "ApplyConfig.table_map": "values must be text, not {'nested': 1} (key 'a')",
        "ApplyConfig.lane_groups": "a group is empty",
        "ApplyConfig.lanes": "must be a whole number >= 1, got 0",
        "ApplyConfig.max_records_per_batch": "must be a whole number >= 1, got True",
        "ApplyConfig.max_duration": "must be a number >= 0, got -1",
        "ApplyConfig.trigger": "unknown value 'once'",
        "ApplyConfig.target_url": "unknown target 'http://nope'",
    }
    assert problems(lambda: ApplyConfig(topics=["t"], topic_pattern="t.*")) == {
        "ApplyConfig.topic_pattern": "given with topics"
    }
    found = problems(lambda: SubmitConfig(master="spark://", deploy_mode="cluster", ship_package="yes"))
    assert found["SubmitConfig.master"] == "'spark://' is not a Spark master URL"
    assert found["SubmitConfig.deploy_mode"].startswith("deploy mode 'cluster' is not supported")
    assert found["SubmitConfig.ship_package"] == "must be True, False or None, got 'yes'"
    assert issubclass(JobConfigError, ValueError) and issubclass(JobConfigError, ConfigError)


def test_values_are_normalised_as_a_command_line_would_read_them() -> None:
    config = ApplyConfig(
        topics=" a, b ,,c",
        table_map={"s.t": "u.t"},
        lane_groups=["s.a, s.b", ("s.c",)],
        settings={"unavailable.value.placeholder": 7},
        changelog_dir="",  # "not given", as the old keyword arguments took it
    )
    assert config.topics == ("a", "b", "c")
    assert config.lane_groups == (("s.a", "s.b"), ("s.c",))
    assert config.settings == {"unavailable.value.placeholder": "7"}
    assert config.changelog_dir is None
    assert ApplyConfig(topics=[["x", "y,z"]]).topics == ("x", "y", "z")
    # A template stays whole until rendered: its commas may be Jinja's own.
    assert ApplyConfig(topics="{{ var.value.topics | join(',') }}").topics == ("{{ var.value.topics | join(',') }}",)
    assert SubmitConfig(master="{{ var.value.master }}").master == "{{ var.value.master }}"
    assert SubmitConfig(jars="a.jar,b.jar").jars == ("a.jar", "b.jar")


def test_the_document_round_trips_and_names_what_it_does_not_know() -> None:
    config = ApplyConfig(
        source="changelog",
        topics=["shop.public.orders"],
        changelog_dir="/state/changelog",
        lane_groups=[["a", "b"]],
        table_map={"a": "b"},
        max_duration=30,
        trigger="continuous",
        checkpoint="/ck",
    )
    document = json.loads(json.dumps(config.to_document()))
    assert document["lane_groups"] == [["a", "b"]] and "target_url" not in document  # None is left out
    assert ApplyConfig.from_document(document) == config
    assert config.serialize() == config.to_document()  # what Airflow's rendered view shows

    with pytest.raises(JobConfigError) as failure:
        ApplyConfig.from_document({"lanes": "4", "lane": 4, "checkpoint": "/ck"})
    assert [p.key for p in failure.value.problems] == ["ApplyConfig.lane", "ApplyConfig.lanes"]
    assert "one of " in failure.value.problems[0].fix and "lanes" in failure.value.problems[0].fix
    with pytest.raises(JobConfigError, match=r"ApplyConfig: must be a JSON object, got list"):
        ApplyConfig.from_document([])


def test_the_source_kinds_are_the_jobs() -> None:
    assert SOURCE_KINDS == SOURCES


def test_one_json_document_and_the_flags_give_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_URL_ENV, "postgresql://app:pw@db/shop")
    monkeypatch.setenv("CDC_APPLY_KAFKA_OPTIONS", json.dumps({"sasl.password": "pw", "client.id": "env"}))
    flags = parse_args(
        [
            *("--source", "kafka-python", "--bootstrap-servers", "k:9092", "--topics", "a,b"),
            *("--checkpoint", "/ck", "--lanes", "3", "--lane-group", "s.a,s.b", "--table-map", "s.a=t.a"),
            *("--setting", "decimal.handling.mode=string", "--kafka-option", "client.id=flag"),
            *("--trigger", "continuous", "--max-duration", "5", "--app-name", "by-hand"),
        ]
    )
    document = {
        "source": "kafka-python",
        "bootstrap_servers": "k:9092",
        "topics": ["a", "b"],
        "checkpoint": "/ck",
        "lanes": 3,
        "lane_groups": [["s.a", "s.b"]],
        "table_map": {"s.a": "t.a"},
        "settings": {"decimal.handling.mode": "string"},
        "kafka_options": {"client.id": "flag"},
        "trigger": "continuous",
        "max_duration": 5,
        "app_name": "by-hand",
    }
    assert parse_args(["--config-json", json.dumps(document)]) == flags
    assert flags.source.kafka == {"sasl.password": "pw", "client.id": "flag"}  # the environment's, under its own
    assert flags.target_url == "postgresql://app:pw@db/shop" and flags.lane_groups == {"s.a": "s.a", "s.b": "s.a"}


def test_the_jobs_arguments_are_refused_with_what_to_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TARGET_URL_ENV, "delta:/lake")
    with pytest.raises(SystemExit) as exited:
        parse_args(["--topics", "t"])
    assert exited.value.code == 2 and "the following arguments are required: --checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        parse_args(["--config-json", '{"checkpoint": "/ck"}', "--lanes", "3"])
    assert exited.value.code == 2 and "--config-json holds the whole job: leave out --lanes" in capsys.readouterr().err
    # A run by hand is told its flags; the operator's document, its fields.
    with pytest.raises(SystemExit, match=r"--max-duration: must be a number >= 0, got -1.0"):
        parse_args(["--checkpoint", "/ck", "--max-duration", "-1"])
    with pytest.raises(SystemExit, match=r"(?s)--config-json: .*ApplyConfig\.lanes: must be a whole number"):
        parse_args(["--config-json", '{"checkpoint": "/ck", "lanes": 0}'])
    with pytest.raises(SystemExit, match=r"--config-json: Expecting"):
        parse_args(["--config-json", "{lanes: 2}"])
    with pytest.raises(SystemExit, match=r"no checkpoint"):
        parse_args(["--config-json", "{}"])
    assert "--config-json" in parser().format_help()
