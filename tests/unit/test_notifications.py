"""Notification cursors that survive an engine restart, the journal behind them, and Debezium's
``Initial Snapshot`` notifications."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from airflow_cdc.engine import notifications
from airflow_cdc.engine.notifications import (
    InitialSnapshotNotifications,
    Notification,
    NotificationBus,
    NotificationPage,
)


def note(kind: str, n: int = 0) -> Notification:
    return Notification("Incremental Snapshot", kind, {"n": str(n)}, id=f"{kind}-{n}")


def kinds(page: NotificationPage) -> list[str]:
    return [f"{n.type}-{n.additional_data.get('n', '')}" for n in page.notifications]


def read_all(bus: NotificationBus, cursor: str | None, limit: int = 2) -> tuple[list[str], str]:
    """Every page after ``cursor``, ``limit`` at a time."""
    seen: list[str] = []
    while True:
        page = bus.page(cursor, limit)
        assert not page.reset
        seen += kinds(page)
        if not page.notifications:
            return seen, page.cursor
        cursor = page.cursor


def restart(path: Path, *buses: NotificationBus) -> NotificationBus:
    """What an instance restart does to its bus: the old one closes, a new run opens the journal."""
    for bus in buses:
        bus.close()
    bus = NotificationBus()
    bus.persist(path)
    return bus


def test_a_cursor_names_its_run_and_moves_past_what_was_read() -> None:
    bus = NotificationBus()
    empty = bus.page()
    assert empty == NotificationPage(bus.run_id, f"{bus.run_id}:0", (), False)
    for n in range(3):
        bus.publish(note("STARTED", n))
    page = bus.page(empty.cursor, limit=2)
    assert kinds(page) == ["STARTED-0", "STARTED-1"] and page.cursor == f"{bus.run_id}:2"
    assert kinds(bus.page(page.cursor)) == ["STARTED-2"]
    assert bus.page(f"{bus.run_id}:3").cursor == f"{bus.run_id}:3"
    assert kinds(bus.page("1")) == ["STARTED-1", "STARTED-2"]  # a bare number: a place in this run
    items, cursor = bus.since(1)  # in-process readers keep plain numbers
    assert [i["type"] for i in items] == ["STARTED", "STARTED"] and cursor == 3


def test_a_cursor_of_another_run_is_not_read_as_a_place_in_this_one() -> None:
    earlier, now = NotificationBus(), NotificationBus()
    for n in range(5):
        earlier.publish(note("A", n))
    now.publish(note("B"))
    page = now.page(earlier.page().cursor)  # "<earlier>:5" would skip B if numbers were compared
    assert page.reset and kinds(page) == ["B-0"] and page.run_id == now.run_id
    assert now.page("garbage").reset and now.page("run:x").reset


def test_across_restarts_a_cursor_gets_the_rest_of_its_run_then_every_later_run_once(tmp_path: Path) -> None:
    journal = tmp_path / "notifications.jsonl"
    first = restart(journal)
    first.publish(note("A", 1))
    cursor = first.page().cursor  # the reader saw A-1 ...
    first.publish(note("A", 2))  # ... but not what came before the stop
    second = restart(journal, first)
    quiet_cursor = second.page(cursor).cursor  # a run with nothing published yet is known too
    third = restart(journal, second)
    third.publish(note("C", 1))
    third.publish(note("C", 2))

    seen, end = read_all(third, cursor)
    assert seen == ["A-2", "C-1", "C-2"] and end == f"{third.run_id}:2"
    assert read_all(third, quiet_cursor)[0] == ["C-1", "C-2"]
    assert read_all(third, None)[0] == ["A-1", "A-2", "C-1", "C-2"]
    assert [item["id"] for item in third.since(0)[0]] == ["C-1", "C-2"]  # this run only
    third.close()


def test_the_journal_skips_a_torn_line_and_is_compacted_at_each_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notifications, "KEEP", 4)
    journal = tmp_path / "notifications.jsonl"
    first = restart(journal)
    for n in range(3):
        first.publish(note("A", n))
    first.close()
    with journal.open("ab") as file:
        file.write(b'{"run": "' + first.run_id.encode() + b'", "seq": 4, "notif')  # a kill -9 mid-line
    second = restart(journal)
    for n in range(3):
        second.publish(note("B", n))
    assert read_all(second, f"{first.run_id}:0")[0] == ["A-1", "A-2", "B-0", "B-1", "B-2"][-4:]
    third = restart(journal, second)
    lines = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    assert [line["run"] for line in lines if "notification" not in line] == [first.run_id, second.run_id, third.run_id]
    assert len([line for line in lines if "notification" in line]) == 4
    third.close()


def test_the_journal_is_rewritten_when_a_long_run_fills_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notifications, "KEEP", 3)
    journal = tmp_path / "notifications.jsonl"
    bus = restart(journal)
    for n in range(20):
        bus.publish(note("A", n))
    assert len(journal.read_bytes().splitlines()) <= 2 * 3 + 2
    assert read_all(restart(journal, bus), None)[0] == ["A-17", "A-18", "A-19"]


def test_without_the_api_channel_nothing_is_kept_or_written(tmp_path: Path) -> None:
    bus = NotificationBus(("log",))
    bus.persist(tmp_path / "notifications.jsonl")
    bus.publish(note("A"))
    assert bus.page().notifications == () and not (tmp_path / "notifications.jsonl").exists()


def test_a_page_reads_back_from_its_json() -> None:
    bus = NotificationBus()
    bus.publish(Notification("Initial Snapshot", "STARTED", {"connector_name": "shop"}))
    page = bus.page()
    assert NotificationPage.from_json(orjson.loads(orjson.dumps(page.to_json()))) == page


def published(bus: NotificationBus) -> list[tuple[str, str, dict[str, str]]]:
    return [(n.aggregate_type, n.type, dict(n.additional_data)) for n in bus.page().notifications]


def test_initial_snapshot_notifications_have_debeziums_shapes_and_complete_once_committed() -> None:
    bus = NotificationBus()
    snapshot = InitialSnapshotNotifications(bus, "shop")
    snapshot.started(["public.a", "public.b"])
    snapshot.table_started("public.a")
    snapshot.table_completed("public.a", 3)
    snapshot.committed()  # nothing read to the end yet: no COMPLETED
    snapshot.read()
    assert [kind for _, kind, _ in published(bus)] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED"]
    snapshot.committed()
    snapshot.committed()
    snapshot.stopped()  # after COMPLETED: nothing to abort
    tables = "public.a,public.b"
    assert published(bus) == [
        ("Initial Snapshot", "STARTED", {"connector_name": "shop"}),
        (
            "Initial Snapshot",
            "IN_PROGRESS",
            {"connector_name": "shop", "current_collection_in_progress": "public.a", "data_collections": tables},
        ),
        (
            "Initial Snapshot",
            "TABLE_SCAN_COMPLETED",
            {
                "connector_name": "shop",
                "scanned_collection": "public.a",
                "data_collections": tables,
                "total_rows_scanned": "3",
                "status": "SUCCEEDED",
            },
        ),
        ("Initial Snapshot", "COMPLETED", {"connector_name": "shop"}),
    ]


def test_a_snapshot_stopped_before_its_rows_are_committed_is_aborted_and_a_skipped_one_says_so() -> None:
    bus = NotificationBus()
    snapshot = InitialSnapshotNotifications(bus, "shop")
    snapshot.started(["public.a"])
    snapshot.read()
    snapshot.stopped()
    snapshot.stopped()
    InitialSnapshotNotifications(bus, "shop").skipped()
    assert [kind for _, kind, _ in published(bus)] == ["STARTED", "ABORTED", "SKIPPED"]


def test_a_sink_notification_is_written_as_debeziums_with_its_schema() -> None:
    """SinkNotificationChannel's record: key ``{id}``, value with ``timestamp`` an int64, and
    with schemas enabled the NotificationKey / Notification schemas (SchemaFactory's)."""
    from airflow_cdc.engine.connect_schema import NOTIFICATION_SCHEMAS
    from airflow_cdc.engine.records import SourceRecord
    from airflow_cdc.engine.serialization import JsonSerializer
    from airflow_cdc.kafka_connect.notification_topic import notification_of

    n = Notification("Incremental Snapshot", "STARTED", {"data_collections": "public.t"}, id="n1", timestamp="17")
    sunk = n.as_sink_value()
    record = SourceRecord("shop.notes", {"id": n.id}, sunk, {"server": "shop"}, {}, schemas=NOTIFICATION_SCHEMAS)
    written = JsonSerializer(key_schemas=True, value_schemas=True).serialize(record)
    key, value = orjson.loads(written.key or b""), orjson.loads(written.value or b"")
    assert key == {
        "schema": {
            "type": "struct",
            "fields": [{"type": "string", "optional": False, "field": "id"}],
            "optional": False,
            "name": "io.debezium.connector.common.NotificationKey",
            "version": 1,
        },
        "payload": {"id": "n1"},
    }
    assert value["schema"]["name"] == "io.debezium.connector.common.Notification"
    assert [(f["field"], f["type"], f["optional"]) for f in value["schema"]["fields"]] == [
        ("id", "string", False),
        ("type", "string", False),
        ("aggregate_type", "string", False),
        ("additional_data", "map", True),
        ("timestamp", "int64", False),
    ]
    assert value["payload"]["timestamp"] == 17
    assert value["payload"]["additional_data"] == {"data_collections": "public.t"}
    # What the Connect backend's notification reader makes of it: the same notification.
    assert notification_of(written.value, 0) == n
