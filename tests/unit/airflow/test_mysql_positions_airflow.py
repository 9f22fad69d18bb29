"""MySQL/MariaDB positions through the Airflow side, without a server: the offset sensor's trigger
hands GTID sets and ``file:pos`` to the engine as written (here an API answering with the MySQL
connector's own codec), ``CdcOffsetsOperator`` seeks a stopped MariaDB instance to each form,
and so does ``airflow-cdc offsets set --gtid/--binlog``. Nothing on this side parses a position."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from airflow_cdc.cli import main
from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.server.models import InstancePosition, TaskPosition
from airflow_cdc.engine.sources.mysql.positions import MYSQL_POSITIONS
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from airflow_cdc.triggers.offset import CdcOffsetTrigger
from tests.unit.airflow.test_triggers import CONN, TOKEN, FakeApi, connect, events

MARIADB = "io.debezium.connector.mariadb.MariaDbConnector"
MYSQL_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


class MySqlApi(FakeApi):
    """The recorded API of a MySQL/MariaDB instance: ``/position`` judges with the connector's codec."""

    def __init__(self, committed: dict[str, Any], current: dict[str, Any]) -> None:
        super().__init__()
        self.committed_offset, self.current_offset = committed, current

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/position" and request.url.params.get("target") is not None:
            try:
                MYSQL_POSITIONS.parse(request.url.params["target"])
            except OffsetError as exc:
                self.requests.append(request)
                return httpx.Response(400, json={"error_code": 400, "message": f"target: {exc}"})
        return super().handler(request)

    def position(self, target: str | None) -> InstancePosition:
        codec = MYSQL_POSITIONS
        goal = None if target is None else codec.parse(target)
        reached = None if goal is None else codec.reached(self.committed_offset, goal)
        caught_up = codec.caught_up(self.committed_offset, self.current_offset)
        lag = codec.lag(self.committed_offset, self.current_offset)
        task = TaskPosition(
            f"{self.name}-0",
            "streaming",
            {"server": "shop"},
            codec.format(self.committed_offset),
            codec.format(self.current_offset),
            lag,
            caught_up,
            reached,
        )
        shown = None if goal is None else codec.format(goal)
        return InstancePosition("streaming", codec.lag_unit, lag, caught_up, shown, reached, (task,))


def mysql_api(monkeypatch: pytest.MonkeyPatch, committed: dict[str, Any], current: dict[str, Any]) -> MySqlApi:
    api = MySqlApi(committed, current)
    connect(monkeypatch, api, TOKEN)
    return api


def targets(api: FakeApi) -> list[str | None]:
    return [r.url.params.get("target") for r in api.requests if r.url.path == "/position"]


@pytest.mark.parametrize(
    ("committed", "target", "reached"),
    [
        ({"file": "cdc-bin.000002", "pos": 900, "gtids": "0-1-42"}, "0-1-42", True),
        ({"file": "cdc-bin.000002", "pos": 900, "gtids": "0-1-41"}, "0-1-42", False),
        ({"file": "cdc-bin.000002", "pos": 900, "gtids": "0-1-42,1-2-7"}, "1-2-7,0-1-40", True),
        ({"file": "b.000001", "pos": 4, "gtids": f"{MYSQL_UUID}:1-5"}, f"{MYSQL_UUID}:1-5", True),
        ({"file": "b.000001", "pos": 4, "gtids": f"{MYSQL_UUID}:1-4"}, f"{MYSQL_UUID}:1-5", False),
        ({"file": "cdc-bin.000003", "pos": 400}, "cdc-bin.000003:154", True),
        ({"file": "cdc-bin.000003", "pos": 100}, "cdc-bin.000003:154", False),
        ({"file": "cdc-bin.000004", "pos": 4}, "cdc-bin.000003:154", True),
    ],
)
def test_a_gtid_or_binlog_target_goes_to_the_engine_as_written(
    monkeypatch: pytest.MonkeyPatch, committed: dict[str, Any], target: str, reached: bool
) -> None:
    api = mysql_api(monkeypatch, committed, committed)
    trigger = CdcOffsetTrigger(CONN, target=target, poll_interval=0.01)
    if reached:
        [event] = events(trigger)
        assert event["status"] == "success" and event["target"] == target
        assert event["positions"][0]["target"] == target
    else:
        import asyncio

        assert asyncio.run(trigger.poll()) is None  # still waiting
    assert set(targets(api)) == {target}


def test_current_is_the_gtid_position_the_source_stood_at(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    api = mysql_api(
        monkeypatch,
        {"file": "cdc-bin.000001", "pos": 300, "gtids": "0-1-10"},
        {"file": "cdc-bin.000001", "pos": 900, "gtids": "0-1-12"},
    )
    trigger = CdcOffsetTrigger(CONN, target="current", poll_interval=0.01)

    async def scenario() -> list[Any]:
        looks = [await trigger.poll()]
        api.current_offset = {"file": "cdc-bin.000001", "pos": 2000, "gtids": "0-1-20"}  # moves on; the goal does not
        api.committed_offset = {"file": "cdc-bin.000001", "pos": 900, "gtids": "0-1-12"}
        looks.append(await trigger.poll())
        await trigger.cleanup()
        return looks

    first, second = asyncio.run(scenario())
    assert first is None
    assert second["status"] == "success" and second["positions"][0]["target"] == "0-1-12"
    assert targets(api) == [None, "0-1-12", "0-1-12"]


def test_a_target_that_is_no_mysql_position_fails_with_the_engines_words(monkeypatch: pytest.MonkeyPatch) -> None:
    mysql_api(monkeypatch, {"file": "b.000001", "pos": 4, "gtids": "0-1-1"}, {"file": "b.000001", "pos": 4})
    [event] = events(CdcOffsetTrigger(CONN, target="0/16B3748", poll_interval=0.01))
    assert event["status"] != "success"
    assert "0-1-42" in event["message"] and "mysql-bin.000003:154" in event["message"]  # the codec's example


# -- seeking a stopped MariaDB instance ---------------------------------------------------------
@pytest.fixture
def stopped_mariadb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A MariaDB instance's config file (never started: its offsets are changed without a server)
    and connection ``cdc_unit`` naming it."""
    path = tmp_path / "mariadb.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "maria-unit",
                "connector.class": MARIADB,
                "topic.prefix": "shop",
                "database.include.list": "shop",
                "state.dir": str(tmp_path / "state"),
            }
        )
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN.upper()}",
        json.dumps({"conn_type": "cdc_engine", "extra": {"config_path": str(path)}}),
    )
    return path


POSITIONS = [
    ("0-1-42", {"file": "", "pos": 0, "gtids": "0-1-42"}),
    ("0-1-42,1-2-7", {"file": "", "pos": 0, "gtids": "0-1-42,1-2-7"}),
    (f"{MYSQL_UUID}:1-5", {"file": "", "pos": 0, "gtids": f"{MYSQL_UUID}:1-5"}),
    ("cdc-bin.000003:154", {"file": "cdc-bin.000003", "pos": 154}),
]


@pytest.mark.parametrize(("position", "offset"), POSITIONS)
def test_the_offsets_operator_seeks_to_a_gtid_set_or_a_binlog_position(
    stopped_mariadb: Path, position: str, offset: dict[str, Any]
) -> None:
    from tests.integration.airflow.support import task_context

    seek = CdcOffsetsOperator(  # force: there is no server here to check the position against
        task_id="seek", cdc_conn_id=CONN, action="seek", position=position, partition={"server": "shop"}, force=True
    )
    moved = seek.execute(task_context())
    assert moved["action"] == "seek" and moved["partition"] == {"server": "shop"}
    assert moved["offset"] == offset and moved["position"] == position
    assert codec_for(yaml.safe_load(stopped_mariadb.read_text())).format(moved["offset"]) == position


def test_the_offsets_operator_names_the_forms_of_a_mysql_position(stopped_mariadb: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from tests.integration.airflow.support import task_context

    seek = CdcOffsetsOperator(task_id="seek", cdc_conn_id=CONN, action="seek", position="0/16B3748")
    with pytest.raises(AirflowFailException) as failed:
        seek.execute(task_context())
    assert "0-1-42" in str(failed.value) and "mysql-bin.000003:154" in str(failed.value)


@pytest.mark.parametrize("flag", ["--gtid", "--binlog", "--position"])
@pytest.mark.parametrize(("position", "offset"), POSITIONS)
def test_the_cli_sets_a_gtid_set_or_a_binlog_position(
    stopped_mariadb: Path, capsys: pytest.CaptureFixture[str], flag: str, position: str, offset: dict[str, Any]
) -> None:
    partition = json.dumps({"server": "shop"})
    # --force: there is no server here to check the position against (it would be refused).
    command = ["offsets", "set", "--config", str(stopped_mariadb), flag, position, "--partition", partition]
    assert main([*command, "--force"]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert changed["offset"] == offset and changed["position"] == position
    assert main(["offsets", "show", "--config", str(stopped_mariadb)]) == 0
    [shown] = json.loads(capsys.readouterr().out)["offsets"]
    assert shown == {"partition": {"server": "shop"}, "offset": offset, "position": position}
