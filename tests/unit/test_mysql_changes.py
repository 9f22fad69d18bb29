"""The MySQL/MariaDB change builder and the binlog adapter's decoding, without a server (the
whole events are checked against Debezium in tests/compat/test_mariadb_oracle.py)."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.sources.mysql.binlog_values import MYSQL_LATIN1, codec
from airflow_cdc.engine.sources.mysql.changes import plan
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.snapshot_records import snapshot_marker
from airflow_cdc.engine.sources.mysql.temporal import ZERO_DATE
from airflow_cdc.engine.sources.mysql.types import MySqlColumn, ValueModes


def _zero_dates_table() -> Table:
    return Table(
        "db",
        "t",
        (
            MySqlColumn("id", "int", "int(11)", nullable=False),
            MySqlColumn(
                "dt6d", "datetime", "datetime(6)", nullable=False, fsp=6, default="'2000-01-01 00:00:00.500000'"
            ),
            MySqlColumn("dn", "date", "date", nullable=True),
        ),
        ("id",),
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, 946_684_800_500_000),  # datetime(6): microseconds
        ({"time.precision.mode": "connect"}, 946_684_800_500),  # connect: milliseconds
    ],
)
def test_a_streamed_zero_date_takes_the_default_in_the_configured_mode(settings: dict, expected: int) -> None:
    """A zero date in a NOT NULL column streams as its default converted in the configured
    time.precision.mode (it was converted with the default modes whatever the configuration)."""
    rows = plan(_zero_dates_table(), "p.db.t", ValueModes.from_config(settings), snapshot=False)
    assert rows.row((1, ZERO_DATE, ZERO_DATE)) == {"id": 1, "dt6d": expected, "dn": None}


def test_latin1_is_decoded_as_the_server_converts_it() -> None:
    """MySQL's latin1 is cp1252 whose five undefined bytes are the C1 controls U+0081...;
    Python's cp1252 refuses them, which stopped the stream (mysql-replication decodes strictly)."""
    data = bytes.fromhex("41818D8F909D5AE980FF")
    assert data.decode(MYSQL_LATIN1) == "A\x81\x8d\x8f\x90\x9dZé€ÿ"
    assert data.decode(MYSQL_LATIN1).encode(MYSQL_LATIN1) == data
    with pytest.raises(UnicodeDecodeError):
        data.decode("cp1252")


def test_text_is_decoded_with_the_codec_of_its_character_set() -> None:
    assert codec("latin1") == MYSQL_LATIN1
    assert codec("utf8mb4") == codec("utf8mb3") == codec("utf8") == codec(None) == "utf-8"
    assert codec("cp1251") == "cp1251"
    assert codec("ucs2") == "utf-16-be"  # MySQL's UCS-2 and UTF-16 are big-endian
    assert codec("binary") is None  # bytes
    assert codec("swe7") is None  # no Python codec: its values stay bytes


@pytest.mark.parametrize(
    ("first_table", "last_table", "first_row", "last_row", "marker"),
    [
        (True, False, True, False, "first"),
        (True, False, True, True, "first"),  # the first table's only row
        (True, True, True, True, "last"),  # the only table's only row
        (False, True, False, True, "last"),
        (False, True, True, False, "first_in_data_collection"),
        (False, False, True, True, "last_in_data_collection"),  # a middle table's only row
        (False, False, False, True, "last_in_data_collection"),
        (False, False, True, False, "first_in_data_collection"),
        (True, True, False, False, "true"),
    ],
)
def test_snapshot_markers_as_debezium(
    first_table: bool, last_table: bool, first_row: bool, last_row: bool, marker: str
) -> None:
    assert snapshot_marker(first_table, last_table, first_row=first_row, last_row=last_row) == marker
