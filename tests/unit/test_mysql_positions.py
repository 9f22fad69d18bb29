"""MySQL/MariaDB positions: both GTID forms parsed, printed, compared and covered; binlog
file:pos; the codec's offsets with Debezium's keys. The MySQL forms are as MySQL 8 prints them
(``@@gtid_executed`` with its newlines, ``SHOW BINARY LOG STATUS``, 8.4's tagged GTIDs)."""

from __future__ import annotations

import itertools

import pytest

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.sources.mysql.positions import (
    MYSQL_POSITIONS,
    MariaDbGtidSet,
    MySqlGtidSet,
    binlog_sequence,
    compare_gtid_sets,
    offset_of,
    parse_gtid_set,
)

CODEC = MYSQL_POSITIONS
A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "8f9b2a1c-0d3e-11ef-8a4b-0242ac120002"

#: Recorded from MySQL 8.0/8.4 servers: SELECT @@GLOBAL.gtid_executed (a newline after each comma),
#: SHOW BINARY LOG STATUS's Executed_Gtid_Set, and a tagged set (SET gtid_next='AUTOMATIC:tag').
MYSQL8_GTID_EXECUTED = f"{A.upper()}:1-5:11-18,\n{B}:1-27"
MYSQL84_TAGGED = f"{A}:1-5:batch_2024:1-3:7,{B}:1-2"


def test_a_mariadb_position_parses_prints_and_keeps_the_newest_of_a_domain() -> None:
    state = MariaDbGtidSet.parse("1-2-7, 0-1-42")
    assert str(state) == "0-1-42,1-2-7"
    # @@gtid_binlog_state lists each server of a domain; the highest sequence stands.
    assert str(MariaDbGtidSet.parse("0-1-40,0-2-42,0-1-41")) == "0-2-42"
    assert str(state.with_gtid("0-3-43")) == "0-3-43,1-2-7"
    assert str(state.with_gtid("5-1-1")) == "0-1-42,1-2-7,5-1-1"


def test_a_mariadb_state_covers_another_when_every_domain_is_at_least_as_far() -> None:
    state = MariaDbGtidSet.parse("0-1-42,1-2-7")
    assert state.covers(MariaDbGtidSet.parse("0-1-41"))
    assert state.covers(MariaDbGtidSet.parse("0-9-42,1-2-7"))  # the server id does not order
    assert not state.covers(MariaDbGtidSet.parse("0-1-43"))
    assert not state.covers(MariaDbGtidSet.parse("2-1-1"))  # a domain it has not seen
    assert compare_gtid_sets(state, MariaDbGtidSet.parse("0-1-41,1-2-7")) == 1
    assert compare_gtid_sets(MariaDbGtidSet.parse("0-1-43,1-2-1"), state) is None
    assert state.transactions_after(MariaDbGtidSet.parse("0-1-40")) == 2 + 7


def test_recorded_mysql8_gtid_sets_parse_and_print_in_mysqls_normal_form() -> None:
    executed = MySqlGtidSet.parse(MYSQL8_GTID_EXECUTED)
    assert str(executed) == f"{A}:1-5:11-18,{B}:1-27"
    assert str(MySqlGtidSet.parse(f"{B}:3-4:1-2:9,{A}:5")) == f"{A}:5,{B}:1-4:9"  # merged, sorted
    tagged = MySqlGtidSet.parse(MYSQL84_TAGGED)
    assert str(tagged) == f"{A}:1-5:batch_2024:1-3:7,{B}:1-2"
    assert tagged.sets[(A, "batch_2024")] == ((1, 3), (7, 7))
    assert str(executed.with_gtid(f"{A}:6")) == f"{A}:1-6:11-18,{B}:1-27"
    assert str(executed.with_gtid(f"{A}:batch:1")) == f"{A}:1-5:11-18:batch:1,{B}:1-27"


def test_a_mysql_set_covers_the_sets_it_contains_and_counts_what_another_lacks() -> None:
    executed = MySqlGtidSet.parse(MYSQL8_GTID_EXECUTED)
    assert executed.covers(MySqlGtidSet.parse(f"{A}:2-4:12"))
    assert not executed.covers(MySqlGtidSet.parse(f"{A}:6"))  # the gap 6-10
    assert not executed.covers(MySqlGtidSet.parse(f"{A}:tag:1"))  # a tag is its own sequence
    assert compare_gtid_sets(executed, MySqlGtidSet.parse(f"{A}:1-5")) == 1
    assert compare_gtid_sets(MySqlGtidSet.parse(f"{A}:1-5"), executed) == -1
    assert compare_gtid_sets(MySqlGtidSet.parse(f"{A}:1-6"), executed) is None
    assert executed.transactions_after(MySqlGtidSet.parse(f"{A}:1-3,{B}:1-20")) == 2 + 8 + 7
    assert MySqlGtidSet.parse(f"{A}:1-1000000").transactions_after(MySqlGtidSet.parse(f"{A}:1-10")) == 999_990


@pytest.mark.parametrize(
    "text",
    ["0-1", "0-1-x", f"{A}", f"{A}:", f"{A}:5-3", f"{A}:0", "nonsense:1-2", f"{A}:1-2:Bad-Tag", "1-2-3,x"],
)
def test_what_is_no_gtid_set_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_gtid_set(text)


def test_the_empty_set_is_covered_by_both_forms() -> None:
    empty = parse_gtid_set("")
    assert MariaDbGtidSet.parse("0-1-1").covers(empty) and MySqlGtidSet.parse(f"{A}:1").covers(empty)
    assert not empty.covers(MariaDbGtidSet.parse("0-1-1"))


def test_positions_users_write_parse_to_offsets_and_print_back() -> None:
    assert CODEC.parse(" mysql-bin.000003:154 ") == {"file": "mysql-bin.000003", "pos": 154}
    assert CODEC.format({"file": "mysql-bin.000003", "pos": 154}) == "mysql-bin.000003:154"
    assert CODEC.parse("0-1-42,1-2-7") == {"file": "", "pos": 0, "gtids": "0-1-42,1-2-7"}
    assert CODEC.parse(f"{A}:5") == {"file": "", "pos": 0, "gtids": f"{A}:5"}  # not file {A} at 5
    offset = CODEC.parse(MYSQL8_GTID_EXECUTED)
    assert CODEC.format(offset) == f"{A}:1-5:11-18,{B}:1-27"
    for text in ("", "mysql-bin.000003", "0/16B3748", "a:b:c"):
        with pytest.raises(OffsetError, match="GTID set"):
            CODEC.parse(text)


def test_offsets_have_debeziums_keys_without_zero_skips() -> None:
    assert offset_of(file="f.000001", pos=4) == {"file": "f.000001", "pos": 4}
    assert offset_of(file="f.000001", pos=4, gtids="0-1-2", event=2, row=1, ts_sec=9, server_id=1) == {
        "file": "f.000001",
        "pos": 4,
        "gtids": "0-1-2",
        "event": 2,
        "row": 1,
        "ts_sec": 9,
        "server_id": 1,
    }


def test_gtid_offsets_order_by_the_set_then_by_the_place_in_the_next_transaction() -> None:
    before = offset_of(file="b.000001", pos=100, gtids="0-1-5")
    inside = [
        offset_of(file="b.000001", pos=100, gtids="0-1-5", event=1),
        offset_of(file="b.000001", pos=100, gtids="0-1-5", event=1, row=2),
        offset_of(file="b.000001", pos=100, gtids="0-1-5", event=3),
    ]
    after = offset_of(file="b.000001", pos=900, gtids="0-1-6")
    for earlier, later in itertools.pairwise([before, *inside, after]):
        assert CODEC.compare(earlier, later) == -1 and CODEC.compare(later, earlier) == 1
    assert CODEC.compare(before, dict(before)) == 0
    assert CODEC.lag(before, after) == 1
    assert CODEC.caught_up(after, after) and not CODEC.caught_up(before, after)


def test_unordered_mysql_sets_have_reached_neither() -> None:
    one = offset_of(file="", pos=0, gtids=f"{A}:1-5")
    other = offset_of(file="", pos=0, gtids=f"{A}:1-4,{B}:1")
    assert CODEC.compare(one, other) is None
    assert not CODEC.reached(one, other) and not CODEC.reached(other, one)


def test_file_offsets_order_by_binlog_sequence_then_position() -> None:
    ordered = [
        offset_of(file="bin.000009", pos=900),
        offset_of(file="bin.000010", pos=4),
        offset_of(file="bin.000010", pos=4, event=2),
        offset_of(file="bin.000010", pos=120),
    ]
    for earlier, later in itertools.pairwise(ordered):
        assert CODEC.compare(earlier, later) == -1
    assert binlog_sequence("bin.000010") == 10 and binlog_sequence("nodot") == -1
    assert CODEC.lag(ordered[0], ordered[1]) is None  # bytes across files mean nothing
    assert CODEC.compare({"gtids": "0-1-1"}, {"file": "bin.000001", "pos": 4}) is None


def test_an_unfinished_snapshot_comes_before_every_streaming_offset() -> None:
    snapshot = {**offset_of(file="bin.000010", pos=4000, gtids="0-1-100"), "snapshot": True}
    streaming = offset_of(file="bin.000010", pos=4, gtids="0-1-1")
    assert CODEC.compare(snapshot, streaming) == -1 and CODEC.compare(streaming, snapshot) == 1
    assert CODEC.compare(snapshot, dict(snapshot)) == 0
    assert CODEC.lag(snapshot, streaming) is None


def test_a_malformed_stored_gtid_set_is_an_offset_error() -> None:
    with pytest.raises(OffsetError, match="malformed gtids"):
        CODEC.compare({"gtids": "garbage"}, {"gtids": "0-1-1"})


@pytest.mark.parametrize(
    "name",
    [
        "mysql",
        "mariadb",
        "io.debezium.connector.mysql.MySqlConnector",
        "io.debezium.connector.mariadb.MariaDbConnector",
    ],
)
def test_the_connector_names_resolve_to_this_codec(name: str) -> None:
    from airflow_cdc.engine.positions import codec_for

    assert codec_for({"connector.class": name}) is MYSQL_POSITIONS
