"""Position codecs: users' positions to offsets, offsets compared, "caught up" and lag - for
PostgreSQL, the synthetic source and connectors without a codec; and that the interface fits a
partially ordered position (MySQL GTID sets), which only a codec may know."""

from __future__ import annotations

import itertools

import pytest

from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connector import SourceConnector, SourceTask
from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.positions import OPAQUE_POSITIONS, PositionCodec, codec_for
from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.sources.postgres.connector import PostgresConnector
from airflow_cdc.engine.sources.postgres.positions import POSTGRES_POSITIONS, lsn_offset
from airflow_cdc.engine.sources.synthetic import SequencePositions

PG = POSTGRES_POSITIONS


def in_transaction(commit: int, lsn: int, event: int = 0) -> dict[str, int]:
    """A change inside the transaction after the one that ended at ``commit``."""
    return {"lsn": lsn, "lsn_proc": lsn, "lsn_commit": commit, "event": event, "txId": 7, "ts_usec": 1}


def test_an_lsn_parses_to_the_offset_that_resumes_after_it_and_prints_back() -> None:
    offset = PG.parse(" 0/16B3748 ")
    assert offset == {
        "lsn": 0x16B3748,
        "lsn_proc": 0x16B3748,
        "lsn_commit": 0x16B3748,
        "event": 0,
        "txId": None,
        "ts_usec": 0,
    }
    assert PG.format(offset) == "0/16B3748"
    assert PG.parse("16/b374d848") == lsn_offset((0x16 << 32) | 0xB374D848)
    assert PG.parse("23836104") == lsn_offset(23836104)  # pg_lsn as a number, as some tools print it


@pytest.mark.parametrize("text", ["", "16B3748", "0/xyz", "mysql-bin.000003:4", "1/2/3", "-1/0", "FFFFFFFFF/0"])
def test_what_is_not_an_lsn_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(OffsetError, match="an LSN like 0/16B3748"):
        PG.parse(text)


def test_postgres_offsets_order_by_the_committed_lsn_then_by_the_place_in_the_next_transaction() -> None:
    committed_100 = lsn_offset(100)
    inside = [in_transaction(100, 120), in_transaction(100, 120, 1), in_transaction(100, 150)]
    committed_200 = lsn_offset(200)
    ordered: list[Offset] = [committed_100, *inside, committed_200]
    for earlier, later in itertools.pairwise(ordered):
        assert PG.compare(earlier, later) < 0 < PG.compare(later, earlier)
    assert PG.compare(committed_100, dict(committed_100)) == 0
    assert PG.format(inside[-1]) == "0/64"  # what is committed: up to the last whole transaction


def test_an_unfinished_snapshot_has_reached_no_position_and_has_no_lag() -> None:
    snapshot = {**lsn_offset(500), "snapshot": True, "last_snapshot_record": False}
    assert not PG.reached(snapshot, lsn_offset(1))
    assert PG.compare(snapshot, lsn_offset(0)) < 0
    assert PG.lag(snapshot, lsn_offset(900)) is None
    assert not PG.caught_up(snapshot, lsn_offset(500))
    done = {**lsn_offset(500), "snapshot_completed": True}  # the marker at the snapshot's end
    assert PG.reached(done, lsn_offset(500)) and PG.compare(done, snapshot) > 0


def test_postgres_lag_is_wal_bytes_and_caught_up_means_the_current_lsn_is_committed() -> None:
    assert PG.lag(lsn_offset(100), lsn_offset(4196)) == 4096
    assert PG.lag(lsn_offset(5000), lsn_offset(4196)) == 0
    assert PG.lag_unit == "bytes"
    assert not PG.caught_up(in_transaction(100, 150), lsn_offset(200))
    assert PG.caught_up(lsn_offset(200), lsn_offset(200))
    assert PG.reached({"lsn": 300}, lsn_offset(200))  # an offset given as JSON with the LSN only


def test_the_connector_carries_its_codec_and_codec_for_finds_it_by_connector_class() -> None:
    assert PostgresConnector.positions is PG
    assert codec_for({"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}) is PG
    assert isinstance(codec_for({"connector.class": "synthetic"}), SequencePositions)
    assert codec_for({"connector.class": "tests.unit.test_positions:_NoCodecConnector"}) is OPAQUE_POSITIONS
    with pytest.raises(OffsetError, match="nowhere"):
        codec_for({"connector.class": "nowhere:Connector"})


def test_without_a_codec_positions_are_json_offsets_equal_or_unordered() -> None:
    offset = OPAQUE_POSITIONS.parse('{"b": 1, "a": "x"}')
    assert offset == {"a": "x", "b": 1} and OPAQUE_POSITIONS.format(offset) == '{"a":"x","b":1}'
    assert OPAQUE_POSITIONS.reached(offset, {"a": "x", "b": 1})
    assert OPAQUE_POSITIONS.compare(offset, {"a": "y"}) is None
    assert not OPAQUE_POSITIONS.reached(offset, {"a": "y"})
    assert OPAQUE_POSITIONS.lag(offset, offset) is None
    for bad in ("[1]", "{oops"):
        with pytest.raises(OffsetError, match="an offset as JSON"):
            OPAQUE_POSITIONS.parse(bad)


def test_synthetic_positions_are_event_numbers() -> None:
    codec = SequencePositions()
    assert codec.parse("99") == {"seq": 99} and codec.format({"seq": 99}) == "99"
    assert codec.lag({"seq": 10}, {"seq": 25}) == 15 and codec.lag_unit == "events"
    assert codec.caught_up({"seq": 25}, {"seq": 25}) and not codec.reached({"seq": 24}, {"seq": 25})
    with pytest.raises(OffsetError, match="an event number like 99"):
        codec.parse("0/16B3748")


class _GtidSets(PositionCodec):
    """The shape of a MySQL GTID-set codec (the MySQL source will bring the real one): a set is
    after another only if it contains it."""

    example = "a GTID set like 3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"
    lag_unit = "transactions"

    def parse(self, text: str) -> Offset:
        return {"gtids": text}

    def format(self, offset: Offset) -> str:
        return str(offset["gtids"])

    def compare(self, a: Offset, b: Offset) -> int | None:
        set_a, set_b = self._transactions(a), self._transactions(b)
        if set_a == set_b:
            return 0
        if set_a < set_b:
            return -1
        return 1 if set_a > set_b else None

    def lag(self, committed: Offset, current: Offset) -> int:
        return len(self._transactions(current) - self._transactions(committed))

    @staticmethod
    def _transactions(offset: Offset) -> set[tuple[str, int]]:
        out = set()
        for part in str(offset["gtids"]).split(","):
            server, _, ranges = part.partition(":")
            low, _, high = ranges.partition("-")
            out |= {(server, n) for n in range(int(low), int(high or low) + 1)}
        return out


def test_the_interface_fits_partially_ordered_positions() -> None:
    gtids = _GtidSets()
    committed = gtids.parse("a:1-5,b:1-2")
    assert gtids.reached(committed, gtids.parse("a:1-3"))
    assert not gtids.reached(committed, gtids.parse("a:1-3,c:1"))  # not ordered: not reached
    assert gtids.compare(committed, gtids.parse("a:1-3,c:1")) is None
    assert gtids.lag(committed, gtids.parse("a:1-7,b:1-2")) == 2
    assert not gtids.caught_up(committed, gtids.parse("a:1-7,b:1-2"))


class _NoCodecConnector(SourceConnector):
    """A connector that brings no codec of its own."""

    def task_class(self) -> type[SourceTask]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[Config]:
        raise NotImplementedError
