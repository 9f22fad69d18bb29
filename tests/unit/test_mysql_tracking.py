"""The binlog position tracker (sans-IO) and the server checks' pure parts: offsets per row,
event and transaction, skips on resume and after a reconnect inside a transaction, and the
privileges read from SHOW GRANTS."""

from __future__ import annotations

from airflow_cdc.engine.sources.mysql.server import missing_privileges
from airflow_cdc.engine.sources.mysql.tracking import PositionTracker, StartPoint


def tracker(**start: object) -> PositionTracker:
    point = StartPoint.from_offset({"file": "bin.000001", "pos": 100, "gtids": "0-1-5", **start})
    return PositionTracker(point)


def test_offsets_inside_a_transaction_count_events_and_rows_and_a_commit_adds_its_gtid() -> None:
    t = tracker()
    t.begin("0-1-6", 100, 1700000000, 1)
    t.event_done()  # the table map
    assert t.rows_to_skip() == 0
    assert t.row_offset(0, 2) == {
        "file": "bin.000001",
        "pos": 100,
        "gtids": "0-1-5",
        "event": 1,
        "row": 1,
        "ts_sec": 1700000000,
        "server_id": 1,
    }
    assert t.row_offset(1, 2)["row"] == 2
    t.event_done()
    assert t.commit(400) == {"file": "bin.000001", "pos": 400, "gtids": "0-1-6", "ts_sec": 1700000000, "server_id": 1}


def test_a_resume_skips_the_events_and_rows_the_offset_says_were_delivered() -> None:
    t = tracker(event=3, row=1)
    t.begin("0-1-6", 100, 0, 1)
    skips = []
    for _ in range(5):
        skips.append(t.rows_to_skip())
        t.event_done()
    assert skips == [-1, -1, -1, 1, 0]
    assert not t.skipping


def test_a_transaction_read_again_after_a_reconnect_skips_what_was_seen_of_it() -> None:
    t = tracker()
    t.begin("0-1-6", 100, 0, 1)
    t.event_done()
    t.event_done()
    t.begin("0-1-6", 100, 0, 1)  # the reader reconnected and reads the transaction again
    assert [t.rows_to_skip() for _ in range(1)] == [-1]
    t.event_done()
    assert t.rows_to_skip() == -1
    t.event_done()
    assert t.rows_to_skip() == 0


def test_the_first_gtid_decides_the_form_of_an_empty_set() -> None:
    t = PositionTracker(StartPoint(None, "bin.000001", 4))
    t.begin("3e11fa47-71ca-11e1-9e33-c80aa9429562:7", 4, 0, 1)
    assert t.commit(90)["gtids"] == "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"
    t = PositionTracker(StartPoint(None, "bin.000001", 4))
    t.begin("0-1-1", 4, 0, 1)
    assert t.commit(90)["gtids"] == "0-1-1"


def test_without_gtids_offsets_are_file_and_position_only() -> None:
    t = PositionTracker(StartPoint(None, "bin.000001", 4))
    t.begin(None, 4, 0, 1)
    assert "gtids" not in t.row_offset(0, 1)
    t.rotate("bin.000002", 4)  # a rotation inside a transaction does not move its start
    assert t.commit(200) == {"file": "bin.000002", "pos": 200, "ts_sec": 0, "server_id": 1}


def test_missing_replication_privileges_are_named_in_each_servers_words() -> None:
    assert (
        missing_privileges(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"], mariadb=True) == []
    )
    assert (
        missing_privileges(
            ["GRANT SELECT, RELOAD, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`"], mariadb=True
        )
        == []
    )
    assert missing_privileges(["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"], mariadb=False) == []
    only_db = ["GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`%`"]
    assert missing_privileges(only_db, mariadb=True) == ["REPLICATION SLAVE", "BINLOG MONITOR"]
    assert missing_privileges(only_db, mariadb=False) == ["REPLICATION SLAVE", "REPLICATION CLIENT"]
