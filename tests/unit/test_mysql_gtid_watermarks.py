"""Read-only incremental snapshots' GTID windows (``gtid_windows.py``), sans-IO: which
transactions a watermark contains, when the stream has reached one, Debezium's high watermark
(after less before), and where the closes fall in a stream of records - for MySQL's
``uuid:intervals`` sets (MySQL 8 is not installable here: these are its recorded forms) and
MariaDB's ``domain-server-sequence`` positions. Also the start-up check and its error when the
server has no GTIDs."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine.records import PositionMarker, SourceRecord
from airflow_cdc.engine.snapshots.events import CLOSE, Watermark
from airflow_cdc.engine.sources.mysql.gtid_windows import (
    GtidVisibility,
    GtidWindow,
    GtidWindows,
    contains,
    high_watermark,
    reached,
)
from airflow_cdc.engine.sources.mysql.incremental import check_read_only
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet, MySqlGtidSet, parse_gtid_set
from airflow_cdc.engine.sources.mysql.server import ServerInfo, ServerSetupError

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "8f9b2a1c-0d3e-11ef-8a4b-0242ac120002"
PARTITION = {"server": "shop"}


def my(text: str) -> MySqlGtidSet:
    return MySqlGtidSet.parse(text)


def maria(text: str) -> MariaDbGtidSet:
    return MariaDbGtidSet.parse(text)


# -- sets --------------------------------------------------------------------------------------------


def test_a_mysql_transaction_is_in_a_set_when_an_interval_of_its_source_holds_it() -> None:
    # As SHOW BINARY LOG STATUS' Executed_Gtid_Set prints it on MySQL 8 (a newline after each comma).
    executed = MySqlGtidSet.parse(f"{A.upper()}:1-5:11-18,\n{B}:1-27")
    assert contains(executed, f"{A}:3") and contains(executed, f"{A}:11") and contains(executed, f"{B}:27")
    assert not contains(executed, f"{A}:7")  # the gap
    assert not contains(executed, f"{A}:19") and not contains(executed, f"{B}:28")
    assert not contains(executed, "0-1-3")  # a MariaDB GTID is in no MySQL set
    tagged = MySqlGtidSet.parse(f"{A}:1-5:batch:1-3")  # MySQL 8.4's tags
    assert contains(tagged, f"{A}:batch:2") and not contains(tagged, f"{A}:batch:4")
    assert contains(tagged, f"{A}:4") and not contains(tagged, f"{A}:other:1")


def test_a_mariadb_transaction_is_in_a_position_up_to_its_domains_sequence() -> None:
    position = maria("0-1-42,1-2-7")
    assert contains(position, "0-1-42") and contains(position, "0-3-40")  # any server of the domain
    assert not contains(position, "0-1-43") and not contains(position, "2-1-1")
    assert contains(position, "1-2-7") and not contains(position, "1-2-8")
    assert not contains(position, f"{A}:1")


def test_debeziums_high_watermark_is_what_committed_during_the_read() -> None:
    low, high = my(f"{A}:1-10,{B}:1-4"), my(f"{A}:1-13:15,{B}:1-4")
    assert str(high_watermark(low, high)) == f"{A}:11-13:15"
    assert high_watermark(low, low).empty
    assert str(high_watermark(my(f"{A}:1-10:12"), my(f"{A}:1-20"))) == f"{A}:11:13-20"
    assert str(high_watermark(my(""), my(f"{B}:1-2"))) == f"{B}:1-2"
    assert str(high_watermark(maria("0-1-10,1-2-7"), maria("0-1-12,1-2-7,2-1-1"))) == "0-1-12,2-1-1"
    assert high_watermark(maria("0-1-10"), maria("0-1-10")).empty


def test_the_stream_reaches_a_watermark_when_each_sources_newest_transaction_is_streamed() -> None:
    target = my(f"{A}:11-13")
    assert not reached(my(f"{A}:1-12"), target)
    assert reached(my(f"{A}:1-13"), target) and reached(my(f"{A}:1-20,{B}:1"), target)
    # A gap the stream never sees (a manually set gtid_purged, say) does not hold a window open.
    assert reached(my(f"{A}:12-13"), target)
    assert not reached(my(f"{B}:1-99"), target)
    assert reached(my(f"{A}:1"), my(""))  # nothing to reach
    assert reached(maria("0-1-12,1-1-3"), maria("0-2-12")) and not reached(maria("0-1-11"), maria("0-1-12"))
    assert not reached(maria("1-1-50"), maria("0-1-1"))


def test_a_window_closing_on_nothing_committed_during_its_read_waits_for_the_low_watermark() -> None:
    assert str(GtidWindow("w", my(f"{A}:1-10"), my(f"{A}:1-10")).target) == f"{A}:1-10"
    assert str(GtidWindow("w", my(f"{A}:1-10"), my(f"{A}:1-12")).target) == f"{A}:11-12"


def test_the_reads_visibility_names_transactions_by_gtid() -> None:
    seen = GtidVisibility(maria("0-1-42"))
    assert seen.sees("0-1-42") and seen.sees("0-2-41") and not seen.sees("0-1-43")
    assert not seen.sees(None) and not seen.sees(42)
    mysql_seen = GtidVisibility(my(f"{A}:1-5"))
    assert mysql_seen.sees(f"{A}:5") and not mysql_seen.sees(f"{A}:6")


# -- where windows close -----------------------------------------------------------------------------


class Stream:
    """Records as the MySQL task hands them to the coordinator: a transaction's row changes
    (``source.gtid``, offsets inside it) then its commit marker (``gtids`` with it)."""

    def __init__(self, start: str) -> None:
        self.executed = parse_gtid_set(start)
        self.position: dict[str, Any] = {"file": "bin.000001", "pos": 4, "gtids": start}

    def transaction(self, gtid: str, rows: int = 1) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        before = str(self.executed)
        for row in range(rows):
            value = {"op": "u", "after": {"id": row}, "source": {"gtid": gtid}}
            offset: dict[str, Any] = {"file": "bin.000001", "pos": 100, "gtids": before, "event": 2 * row + 2}
            out.append(SourceRecord("shop.db.t", {"id": row}, value, PARTITION, offset))
        self.executed = self.executed.with_gtid(gtid)
        self.position = {"file": "bin.000001", "pos": 200, "gtids": str(self.executed)}
        out.append(PositionMarker.at(PARTITION, self.position))
        return out


def closes(placed: Any) -> list[tuple[int, str]]:
    """(index in the placed records, window id) of each close watermark."""
    out = []
    for index, record in enumerate(placed):
        if isinstance(record, Watermark):
            assert record.kind == CLOSE
            out.append((index, record.window))
    return out


def test_a_window_closes_before_the_first_transaction_past_its_high_watermark() -> None:
    stream = Stream(f"{A}:1-10")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    windows.place([])
    windows.add(GtidWindow("w1", my(f"{A}:1-10"), my(f"{A}:1-12")))
    first = stream.transaction(f"{A}:11", rows=2)
    past = stream.transaction(f"{A}:13")  # outside the high watermark (A:12 comes later, if at all)
    placed = windows.place(first + past)
    assert closes(placed) == [(3, "w1")]  # after A:11 (2 rows + commit), before A:13's row
    assert placed[3].offset == first[-1].offset  # where A:11 ended
    assert windows.pending == 0


def test_a_window_closes_where_the_stream_reaches_its_high_watermark() -> None:
    stream = Stream(f"{A}:1-10,{B}:1-3")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    windows.add(GtidWindow("w1", my(f"{A}:1-10,{B}:1-3"), my(f"{A}:1-11,{B}:1-4")))
    records = stream.transaction(f"{A}:11") + stream.transaction(f"{B}:4")
    placed = windows.place(records)
    assert closes(placed) == [(4, "w1")]  # right after B:4's commit: both sources reached
    assert placed[4].offset == records[-1].offset


def test_an_idle_stream_closes_a_window_at_its_position() -> None:
    stream = Stream(f"{A}:1-10")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    windows.place(stream.transaction(f"{A}:11"))
    # Nothing committed during the read: the window closes once the stream stands at the low
    # watermark - at once, here, on the next (empty) poll.
    windows.add(GtidWindow("w1", my(f"{A}:1-11"), my(f"{A}:1-11")))
    placed = windows.place([])
    assert closes(placed) == [(0, "w1")] and placed[0].offset == stream.position


def test_a_lagging_stream_closes_a_window_only_when_it_gets_there() -> None:
    stream = Stream(f"{A}:1-5")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    windows.place([])
    windows.add(GtidWindow("w1", my(f"{A}:1-8"), my(f"{A}:1-8")))  # the server was at 8
    windows.add(GtidWindow("w2", my(f"{A}:1-8"), my(f"{A}:1-9")))
    assert closes(windows.place([])) == []
    placed = windows.place(stream.transaction(f"{A}:6") + stream.transaction(f"{A}:7"))
    assert closes(placed) == []  # inside the low watermark: seen by the read, before the window
    placed = windows.place(stream.transaction(f"{A}:8") + stream.transaction(f"{A}:9"))
    assert closes(placed) == [(2, "w1"), (5, "w2")]  # in window order, each where it is reached


def test_the_same_rules_hold_for_mariadb_positions() -> None:
    stream = Stream("0-1-100")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    windows.place([])
    windows.add(GtidWindow("w1", maria("0-1-100"), maria("0-1-102")))
    placed = windows.place(stream.transaction("0-1-101", rows=3))
    assert closes(placed) == []
    placed = windows.place(stream.transaction("0-1-103"))  # 102 was of a table not captured
    assert closes(placed) == [(0, "w1")]


def test_no_window_no_change() -> None:
    stream = Stream(f"{A}:1-10")
    windows = GtidWindows(PARTITION, lambda: stream.position)
    records = stream.transaction(f"{A}:11")
    assert windows.place(records) is records


# -- at start ----------------------------------------------------------------------------------------


def server(*, mariadb: bool, version: str, gtid_mode: bool) -> ServerInfo:
    return ServerInfo(mariadb=mariadb, version=version, gtid_mode=gtid_mode)


def test_read_only_needs_gtids_and_says_how_to_turn_them_on() -> None:
    with pytest.raises(ServerSetupError) as error:
        check_read_only(server(mariadb=False, version="8.0.36", gtid_mode=False))
    message = str(error.value)
    assert "gtid_mode=ON" in message and "enforce_gtid_consistency=ON" in message and "read.only=false" in message
    assert "Read only connection requires GTID_MODE to be ON" in message  # Debezium's words
    with pytest.raises(ServerSetupError, match=r"MariaDB 10\.0 or later"):
        check_read_only(server(mariadb=True, version="5.5.68-MariaDB", gtid_mode=False))
    check_read_only(server(mariadb=False, version="8.4.0", gtid_mode=True))
    check_read_only(server(mariadb=True, version="10.11.9-MariaDB-log", gtid_mode=False))
