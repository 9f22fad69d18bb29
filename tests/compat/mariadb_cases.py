"""What the MariaDB value oracle captures: a table per family of types, rows of ordinary,
extreme, zero and NULL values before capture starts (Debezium's snapshot, ``op=r``), then a
stream of inserts, updates and deletes of the same kinds of values (``c``/``u``/``d``).

Statements run in a session with ``sql_mode=''`` (zero dates and out-of-range inserts are
allowed, as on old servers) and ``time_zone='+00:00'``.
"""

from __future__ import annotations

import re

#: Tables in creation order; every one has an ``id int primary key``.
TABLES = ("ints", "nums", "texts", "bins", "temporal", "zero_dates", "misc")

SCHEMA = (
    """create table ints (
        id int primary key, ti tinyint, tiu tinyint unsigned, t1 tinyint(1), bo bool, si smallint,
        siu smallint unsigned, mi mediumint, miu mediumint unsigned, i int, iu int unsigned, bi bigint,
        biu bigint unsigned, zf int(6) zerofill, sr bigint unsigned not null default 7)""",
    """create table nums (
        id int primary key, d decimal(10,2), d0 decimal(5,0), d65 decimal(65,30), nu numeric(20,6),
        du decimal(8,3) unsigned, dd decimal, f float, fu float unsigned, fmd float(10,4), fp float(30),
        db double, dmd double(12,3), re real)""",
    """create table texts (
        id int primary key, c char(10), vc varchar(100), t text, tt tinytext, mt mediumtext, lt longtext,
        l1 varchar(40) character set latin1, cl1 char(6) character set latin1, tl1 text character set latin1,
        u3 varchar(20) character set utf8mb3, asc7 varchar(20) character set ascii,
        vcb varchar(20) character set utf8mb4 collate utf8mb4_bin)""",
    """create table bins (
        id int primary key, b binary(4), b1 binary(1), vb varbinary(16), bl blob, tb tinyblob, mb mediumblob,
        lb longblob)""",
    """create table temporal (
        id int primary key, d date, t time, t1 time(1), t3 time(3), t6 time(6), dt datetime, dt1 datetime(1),
        dt3 datetime(3), dt4 datetime(4), dt6 datetime(6), ts timestamp null, ts1 timestamp(1) null,
        ts3 timestamp(3) null, ts6 timestamp(6) null, y year)""",
    """create table zero_dates (
        id int primary key, d date, dn date not null, dt datetime, dtn datetime not null,
        dt6n datetime(6) not null, ts timestamp null, tsn timestamp not null default '2000-01-01 00:00:00',
        dd date not null default '2001-02-03', dpart date)""",
    """create table misc (
        id int primary key, e enum('a','b','c d','é','x,y'), en enum('p','q') not null, s set('x','y','z','ü'),
        j json, b1 bit(1), b3 bit(3), b8 bit(8), b10 bit(10), b17 bit(17), b64 bit(64), g geometry, pt point,
        u uuid)""",
    "create table oracle_marker (id int primary key)",
)

_INTS = (
    "insert into ints values (1, -128, 0, 1, true, -32768, 0, -8388608, 0, -2147483648, 0,"
    " -9223372036854775808, 0, 1, 0)",
    "insert into ints values (2, 127, 255, 0, false, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,"
    " 9223372036854775807, 18446744073709551615, 123456, 18446744073709551615)",
    "insert into ints values (3, 5, 200, 7, 2, -2, 40000, -3, 9000000, -4, 3000000000, -5, 9223372036854775808, 0,"
    " 9223372036854775807)",
    "insert into ints (id) values (4)",
)
_NUMS = (
    "insert into nums values (1, 12345678.91, 99999,"
    " 12345678901234567890123456789012345.123456789012345678901234567891, 12345678901234.123456, 99999.999,"
    " 1234567890, 3.14, 0.1, 123456.7891, 3.141592653589793,"
    " 1.7976931348623157e308, 123456789.123, 2.5)",
    "insert into nums values (2, -12345678.91, -99999, -0.000000000000000000000000000001, -0.000001,"
    " 0, -1234567890, -3.4028234e38, 1.17549435e-38, -0.0001, -1e-300, -4.9e-324, -0.001, -1e10)",
    "insert into nums values (3, 0, 0, 0, 0, 0.5, 0, 16777217, 1e-7, 0, 0.1, 0.1, 0, 1e-5)",
    "insert into nums (id) values (4)",
    # floats whose Java 17 Float.toString is not the shortest text (2.2856919E9, 9.0432521E16)
    "insert into nums (id, f, fu, re) values (5, 2.2856919e9, 9.0432521e16, 4.18937487e18)",
)
_TEXTS = (
    "insert into texts values (1, 'abc', 'héllo wörld ✓', 'line1\\nline2\\ttab', '', 'mt', 'lt',"
    " 'café ñ ü ß', 'àé', 'Ærø', 'utf8mb3 ✓', 'plain ascii', 'Case')",
    "insert into texts values (2, '  lead', '日本語 😀 emoji', repeat('x', 300), 'tiny', repeat('m', 1000),"
    " '{\"k\": [1, 2]}', '', '', '', '', '', '')",
    "insert into texts values (3, 'trail  ', 'quote '' and \\\\ backslash', 'e\\u00e9', 'ñ', 'x', 'y',"
    " 'end space ', 'x', 'y', 'z', 'w', 'v')",
    "insert into texts (id) values (4)",
)
_BINS = (
    "insert into bins values (1, x'00010203', x'ff', x'00', x'deadbeef', x'', x'00ff00', x'0102')",
    "insert into bins values (2, x'01', x'00', x'', x'00', x'ff', repeat(x'ab', 300), x'')",
    "insert into bins values (3, x'ffff0000', x'7f', x'00000000', 'text in a blob', x'80', x'01', x'fe')",
    "insert into bins (id) values (4)",
)
_TEMPORAL = (
    "insert into temporal values (1, '1000-01-01', '-838:59:59', '-00:00:00.5', '-12:34:56.789', '838:59:59.000000',"
    " '1000-01-01 00:00:00', '1000-01-01 00:00:00.1', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.0001',"
    " '1000-01-01 00:00:00.000001', '1970-01-01 00:00:01', '1970-01-01 00:00:01.1', '1970-01-01 00:00:01.001',"
    " '1970-01-01 00:00:01.000001', 1901)",
    "insert into temporal values (2, '9999-12-31', '838:59:59', '23:59:59.9', '24:00:00.001', '-838:59:59.000000',"
    " '9999-12-31 23:59:59', '9999-12-31 23:59:59.9', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.9999',"
    " '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07', '2038-01-19 03:14:07.9', '2038-01-19 03:14:07.999',"
    " '2038-01-19 03:14:07.999999', 2155)",
    "insert into temporal values (3, '1969-12-31', '00:00:00', '12:00:00', '-00:00:00.001', '-00:00:01.000001',"
    " '2024-02-29 13:37:03', '2024-02-29 13:37:03', '2024-02-29 13:37:03.5', '2024-02-29 13:37:03.05',"
    " '2024-02-29 13:37:03.5', '2024-02-29 13:37:03', '2024-02-29 13:37:03', '2024-02-29 13:37:03.5',"
    " '2024-02-29 13:37:03.050000', 1999)",
    "insert into temporal (id) values (4)",
)
_ZERO_DATES = (
    "insert into zero_dates values (1, '0000-00-00', '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00',"
    " '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00', '2020-00-15')",
    "insert into zero_dates values (2, '2020-01-02', '2020-01-02', '2020-01-02 03:04:05', '2020-01-02 03:04:05',"
    " '2020-01-02 03:04:05.5', '2020-01-02 03:04:05', '2020-01-02 03:04:05', '2020-01-02', '2020-05-00')",
    "insert into zero_dates (id, dn, dtn, dt6n, tsn, dd) values (3, '1970-01-01', '1970-01-01 00:00:00',"
    " '1970-01-01 00:00:00', '1970-01-01 00:00:01', '1970-01-01')",
)
_MISC = (
    "insert into misc values (1, 'a', 'p', 'x,z', '{\"a\": 1, \"b\": [true, null, 1.5]}', b'1', b'101', b'10000001',"
    " b'1000000001', b'10000000000000001', x'0102030405060708', ST_GeomFromText('POINT(1 2)'),"
    " ST_GeomFromText('POINT(-1.5 2.25)', 4326), '123e4567-e89b-12d3-a456-426614174000')",
    "insert into misc values (2, 'c d', 'q', 'ü,y,x', '[1, \"two\", {\"x\": null}]', b'0', b'000', b'0', b'0',"
    " b'0', x'ffffffffffffffff', ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)'), ST_GeomFromText('POINT(0 0)'),"
    " '00000000-0000-0000-0000-000000000001')",
    "insert into misc values (3, 'é', 'p', '', '\"just a string\"', b'1', b'111', b'11111111', b'1111111111',"
    " b'11111111111111111', x'8000000000000000', ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 0))', 3857),"
    " ST_GeomFromText('POINT(3 4)'), 'ffffffff-ffff-ffff-ffff-ffffffffffff')",
    "insert into misc values (4, 'x,y', '', 'x,y,z,ü', 'null', null, null, null, null, null, null, null, null, null)",
    "insert into misc (id, en) values (5, 'q')",
)

#: Tables created while streaming, with their columns as the DDL statement declares them (name,
#: DATA_TYPE, COLUMN_TYPE): Debezium's schema is the statement it read, where a bool is a
#: boolean; information_schema (and SHOW CREATE TABLE, which its snapshot reads) says tinyint(1).
STREAMED_TABLES = {
    "late_bool": (
        ("id", "int", "int(11)"),
        ("b", "boolean", "tinyint(1)"),
        ("bo", "boolean", "tinyint(1)"),
        ("t1", "tinyint", "tinyint(1)"),
    ),
}

#: Rows that exist before capture starts.
SNAPSHOT = (*_INTS, *_NUMS, *_TEXTS, *_BINS, *_TEMPORAL, *_ZERO_DATES, *_MISC)


def streamed_inserts() -> list[str]:
    """The snapshot's rows again with ids 10 higher: the stream converts the values the snapshot did."""
    return [re.sub(r"values \((\d+)", lambda m: f"values ({int(m.group(1)) + 10}", s, count=1) for s in SNAPSHOT]


#: Changes after the snapshot: one transaction each.
STREAM: tuple[tuple[str, ...], ...] = (
    tuple(streamed_inserts()),
    (
        "update ints set ti = -1, biu = 1, bo = null where id = 11",
        "update nums set d = 0.01, f = -0.5, db = null where id = 12",
        "update texts set vc = 'ändern ✓', l1 = 'ÿ' where id = 11",
        "update bins set b = x'0a', vb = x'0b0c' where id = 11",
        "update temporal set t6 = '-00:00:00.000001', ts6 = '2001-02-03 04:05:06.000007', dt4 = null where id = 13",
        "update zero_dates set dn = '0000-00-00', dtn = '2021-03-04 05:06:07' where id = 12",
        "update misc set s = 'z', e = null, b10 = b'1111111111', j = '{}' where id = 11",
    ),
    (
        "delete from ints where id = 12",
        "delete from temporal where id = 11",
        "delete from misc where id = 13",
    ),
    # year 0000 only streams: Debezium's snapshot cannot read it (MariaDB Connector/J throws in
    # YearColumn.getDefaultText and the snapshot fails).
    ("insert into temporal (id, y) values (20, 0)",),
    # A table created while streaming: Debezium's schema is the DDL statement it read.
    ("create table late_bool (id int primary key, b bool, bo boolean, t1 tinyint(1))",),
    ("insert into late_bool values (1, true, false, 1)", "insert into late_bool values (2, 2, 0, 7)"),
)

MARKER = "insert into oracle_marker values (1)"


# --- whole events (test_mariadb_oracle.py) ---------------------------------------------------
#
# A database of its own: the value oracle's tables check values; these check the envelope, keys,
# tombstones, snapshot markers and the stream's shape (transactions, key changes, DDL, keyless
# tables, composite keys). The session runs with sql_mode='' and time_zone='+00:00' too.

#: MariaDB's latin1 is cp1252 with its five holes (0x81, 0x8D, 0x8F, 0x90, 0x9D) kept as the C1
#: controls U+0081...: Python's strict cp1252 refuses them (mysql-replication stopped there).
LATIN1_HOLES = "x'41818D8F909D5A'"

EVENT_SCHEMA = (
    """create table customers (
        id int primary key, name varchar(50) not null, email varchar(100), balance decimal(10,2),
        created datetime(3), born date, note varchar(40) character set latin1)""",
    """create table order_lines (
        order_id int not null, line smallint not null, sku varchar(20), qty int not null default 1,
        primary key (order_id, line))""",
    "create table audit_log (at datetime, msg varchar(100), level tinyint)",
    "create table evolving (id int primary key, a int, b varchar(20))",
    """create table zeros (
        id int primary key, d date not null, dt datetime not null,
        dt6d datetime(6) not null default '2000-01-01 00:00:00.500000', dn date)""",
    "create table empty_at_start (id int primary key, v int)",
    # Binary keys and values beside simple columns, unsigned maxima, ENUM and SET: read from the
    # binlog with the schema history's definitions, whatever binlog_row_metadata says.
    "create table bin_key (id binary(4) primary key, note varchar(10))",
    "create table uuid_key (id binary(16) primary key, n int, v varchar(20))",
    """create table raw_values (
        id int primary key, b binary(4), vb varbinary(10), tb tinyblob, bl blob, mb mediumblob, lb longblob,
        bt bit(10), b1 bit(1))""",
    """create table wide_ints (
        id int primary key, tu tinyint unsigned, su smallint unsigned, mu mediumint unsigned, iu int unsigned,
        bu bigint unsigned, e enum('a','b,c','é'), s set('x','y','z'))""",
    "create table oracle_marker (id int primary key)",
)

EVENT_SNAPSHOT = (
    "insert into customers values (1, 'Ann', 'ann@example.com', 12.50, '2024-01-02 03:04:05.678', '1980-05-06',"
    " 'café')",
    "insert into customers values (2, 'Bob', null, -0.01, null, '1969-12-31', null)",
    f"insert into customers values (3, 'Cy', 'cy@example.com', 0, '1970-01-01 00:00:00', null, {LATIN1_HOLES})",
    "insert into order_lines values (1, 1, 'A-1', 2), (1, 2, 'B-2', 1), (2, 1, 'A-1', 5), (3, 7, null, 1)",
    "insert into audit_log values ('2024-01-01 00:00:00', 'boot', 1), (null, 'no time', null)",
    "insert into evolving values (1, 10, 'one'), (2, 20, 'two')",
    "insert into zeros values (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00')",
)

#: Rows before capture starts.
EVENT_SNAPSHOT_ROWS = 3 + 4 + 2 + 2 + 1


def raw_value_rows(n: int) -> tuple[tuple[str, ...], ...]:
    """Transactions of binary values that are not UTF-8 (trailing zero bytes too), unsigned
    maxima, ENUM and SET; ``n`` (1-9) keeps each run's keys apart."""
    return (
        (
            f"insert into bin_key values (x'0{n}ff8000', 'n1'), (x'6{n}620000', 'n2'), (x'0{n}000000', '')",
            f"insert into uuid_key values (unhex('{n}23e4567e89b12d3a456426614174000'), 1, 'a'),"
            f" (unhex('{n}f00000000000000000000000000ff00'), null, null)",
            f"insert into raw_values values ({n}, x'ff000000', x'80ff', x'', x'fe00', x'00', repeat(x'c3', 70000),"
            " b'1111111111', b'1'), "
            f"({n}0, x'00', x'', null, x'ff', null, x'00ff', b'0000000001', b'0')",
            f"insert into wide_ints values ({n}, 255, 65535, 16777215, 4294967295, 18446744073709551615, 'b,c', 'x,z'),"
            f" ({n}0, 0, 0, 0, 0, 9223372036854775808, 'é', ''),"
            f" ({n}00, 128, 32768, 8388608, 2147483648, 1, null, 'y')",
        ),
        (
            f"update bin_key set note = 'upd' where id = x'0{n}ff8000'",
            f"update bin_key set id = x'0{n}ff0000' where id = x'6{n}620000'",
            f"update raw_values set b = x'0102', vb = x'ffff', lb = x'9f' where id = {n}",
            f"update wide_ints set tu = 254, bu = 18446744073709551614, e = 'a', s = 'x,y,z' where id = {n}",
            f"delete from uuid_key where n is null and hex(id) like '{n}F%'",
            f"delete from wide_ints where id = {n}00",
        ),
    )


#: The stream: one transaction each.
EVENT_STREAM: tuple[tuple[str, ...], ...] = (
    ("insert into customers values (4, 'Dee', 'dee@example.com', 99999999.99, '2024-02-29 12:00:00.001', null, 'ß')",),
    ("update customers set email = null, balance = balance + 1, note = 'ÿ' where id = 1",),
    ("delete from customers where id = 2",),
    # A primary-key change: delete (and tombstone) of the old key, then a create.
    ("update customers set id = 30 where id = 3",),
    # A multi-row transaction: several tables, multi-row events, a composite key.
    (
        "insert into order_lines values (4, 1, 'C-3', 1), (4, 2, 'D-4', 2), (4, 3, 'E-5', 3)",
        "update order_lines set qty = qty + 10 where order_id = 1",
        "delete from order_lines where order_id = 2",
        f"insert into customers (id, name, note) values (5, 'Eve', {LATIN1_HOLES})",
        "insert into empty_at_start values (1, 1)",
    ),
    # A change of one column of a composite key.
    ("update order_lines set line = 9 where order_id = 4 and line = 3",),
    # A table without a primary key: null keys.
    ("insert into audit_log values ('2024-03-01 10:00:00', 'first', 2), ('2024-03-01 10:00:01', 'second', 2)",),
    ("update audit_log set level = 3 where msg = 'first'",),
    ("delete from audit_log where msg = 'boot'",),
    # TRUNCATE: a record of op t where skipped.operations lets it through (Debezium's default skips it).
    ("truncate table audit_log",),
    ("insert into audit_log values ('2024-03-02 10:00:00', 'after truncate', 1)",),
    # DDL mid-stream: rows before and after ADD, DROP and RENAME COLUMN.
    ("alter table evolving add column c varchar(10) default 'dflt'",),
    ("insert into evolving (id, a, b) values (3, 30, 'three')", "update evolving set c = 'set' where id = 1"),
    ("alter table evolving drop column a",),
    ("insert into evolving values (4, 'four', 'x')", "update evolving set b = 'uno' where id = 1"),
    ("alter table evolving rename column b to bb",),
    ("insert into evolving values (5, 'five', 'y')", "delete from evolving where id = 2"),
    # Zero dates streamed: null in a nullable column, the default (or the epoch) in a NOT NULL one,
    # a column added by DDL included (its default is the statement's).
    ("alter table zeros add column da date not null default '2001-02-03'",),
    (
        "insert into zeros values (2, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00',"
        " '0000-00-00')",
    ),
    ("update zeros set dn = '2020-01-01' where id = 1",),
    ("delete from zeros where id = 2",),
    # A table's life while streaming, for the schema change topic: CREATE (a statement's own
    # spelling: no display widths, an alias, defaults, a comment), an index, DROP.
    (
        """create table late_table (
            id integer not null auto_increment, code varchar(8) character set latin1 default 'x',
            price decimal(6,2) unsigned default 0 comment 'cost', kind enum('a','b') not null default 'a',
            at timestamp(3) null default current_timestamp(3), flag bool default true, primary key (id))""",
    ),
    # A BOOL a statement declares: a boolean in Debezium's schema and values (not tinyint's int).
    ("insert into late_table (code, flag) values ('two', false)",),
    ("insert into late_table (code) values ('one')",),
    ("create unique index late_code on late_table (code)",),
    ("create index late_price on late_table (price)",),
    ("drop index late_price on late_table",),
    ("alter table late_table alter column kind set default 'b', modify price decimal(8,2) first",),
    ("drop table late_table",),
    *raw_value_rows(1),
)

#: Streamed after ``SET GLOBAL binlog_row_metadata=FULL`` (the stream before ran with the server's
#: default): the same kinds of rows, which must read the same.
EVENT_STREAM_FULL_METADATA: tuple[tuple[str, ...], ...] = raw_value_rows(2)

EVENT_MARKER = "insert into oracle_marker values (1)"
