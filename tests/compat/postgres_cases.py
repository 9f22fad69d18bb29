"""What the PostgreSQL compatibility oracle captures: a schema with every type we convert (and
the neighbours Debezium's documentation names), rows of ordinary, extreme and NULL values for
the initial snapshot, and a stream of changes that exercises every operation Debezium emits.

Rows 1-3 of each typed table exist before capture starts (snapshot, ``op=r``); rows 11-13 get
the same values through the stream, so both paths convert the same values.
"""

from __future__ import annotations

EXTENSIONS = ("citext", "hstore", "ltree")

SCHEMA = """
create type mood as enum ('sad', 'happy', 'ok ''quoted''');
create domain positive as int check (value > 0);
create domain short_text as varchar(8);

create table numbers (
    id int primary key, i2 smallint, i4 int, i8 bigint, s2 smallserial, s4 serial, s8 bigserial,
    f4 real, f8 double precision, n numeric(10,3), n0 numeric(12,0), nv numeric, n38 numeric(38,10),
    m money, b boolean, o oid, pos positive
);
create table texts (
    id int primary key, t text, vc varchar(20), c char(3), c1 "char", nm name, ci citext,
    u uuid, j json, jb jsonb, x xml, e mood, st short_text, hs hstore, lt ltree
);
create table temporal (
    id int primary key, d date, t time, t0 time(0), t3 time(3), ttz timetz, ttz3 timetz(3),
    ts timestamp, ts0 timestamp(0), ts3 timestamp(3), tstz timestamptz, tstz0 timestamptz(0),
    tstz3 timestamptz(3), iv interval, iv_ym interval year to month, iv_s interval second(3)
);
create table bits (id int primary key, by bytea, b1 bit(1), b3 bit(3), b8 bit(8), b12 bit(12), b64 bit(64),
    vb varbit, vb20 varbit(20));
create table geometric (id int primary key, p point, bx box, ci circle, li line, ls lseg, pa path, po polygon);
create table network (id int primary key, ip inet, cn cidr, mac macaddr, mac8 macaddr8);
create table ranges (id int primary key, r4 int4range, r8 int8range, rn numrange, rts tsrange, rtstz tstzrange,
    rd daterange);
create table arrays (
    id int primary key, ai int[], at text[], an numeric(6,2)[], anv numeric[], ab bool[], ad date[],
    ats timestamp[], atstz timestamptz[], au uuid[], aj jsonb[], ae mood[], a2 int[][], avc varchar(5)[],
    aby bytea[], af float8[], aiv interval[]
);
create table misc (id int primary key, tsv tsvector, tsq tsquery, pl pg_lsn, x8 xid8, bo bool);

create table toasted (id int primary key, note text, big text, bigb bytea, arr text[], js jsonb);
alter table toasted alter column big set storage external;   -- out of line, uncompressed
alter table toasted alter column bigb set storage external;
alter table toasted alter column arr set storage external;
alter table toasted alter column js set storage external;
create table full_identity (id int primary key, v text, big text);
alter table full_identity alter column big set storage external;
alter table full_identity replica identity full;
create table no_key (v text, n int);
create table keyless_full (v text, n int);
alter table keyless_full replica identity full;
create table nothing_identity (id int primary key, v text);
alter table nothing_identity replica identity nothing;
create table composite_key (a int, b text, v text, primary key (a, b));
create table not_null (id int primary key, t text not null default 'x''y', i int not null default -42,
    b bool not null default true, n numeric(5,2) not null default 1.5, plain int not null,
    ts timestamptz not null default now(), d date not null default '2024-01-02', v varchar(5) not null,
    opt text default 'z');
-- Pinning down single behaviours: hstore key order (java.util.HashMap's), arrays by element
-- type (with and without a schema in Debezium), types Debezium does not know, numeric and
-- float edge values, bit lengths, timestamptz precisions, BC and infinite temporals, geometry.
create table hstores (id int primary key, h hstore);
create table arrays_more (
    id int primary key, anv numeric[], anvi numeric[], an0 numeric(5)[], atstz3 timestamptz(3)[],
    atstz0 timestamptz(0)[], ats3 timestamp(3)[], atm time[], attz timetz[], af4 real[], ai2 smallint[],
    ao oid[], abp char(2)[], ain inet[], ar int4range[], aci citext[], alt ltree[], ahs hstore[], ab3 bit(3)[],
    ab1 bit(1)[], am money[], anm name[], avb varbit[], ax xml[], ap point[], apos positive[], apl pg_lsn[]
);
create table numbers_more (id int primary key, nv numeric, nvi numeric, f4 real, f8 double precision,
    n0 numeric(12,0), m money);
create table unknowns (id int primary key, xi xid, snap txid_snapshot, jp jsonpath, mr int4multirange,
    rgc regclass);
create table bits_more (id int primary key, vb1 varbit(1), bdef bit, b9 bit(9), b2 bit(2));
create table temporal_more (id int primary key, tstz1 timestamptz(1), tstz6 timestamptz(6), ttz0 timetz(0),
    iv interval, ts_bc timestamp, tstz_bc timestamptz, d_inf date, ts_inf timestamp, tstz_inf timestamptz,
    ts3_inf timestamp(3));
create table geometric_more (id int primary key, p point, pa path, po polygon, bx box, ci circle);
create table oracle_marker (id int primary key);
"""

#: One row of ordinary values, one of extreme ones, one of NULLs, per typed table; ``{id}`` is
#: the row's id (1, 2, 3 before capture; 11, 12, 13 through the stream).


def _hstore(pairs: list[tuple[str, str | None]]) -> str:
    """An hstore literal built by hstore(keys, values): no hstore text escaping to get wrong."""

    def literal(text: str | None) -> str:
        return "null" if text is None else "'" + text.replace("'", "''") + "'"

    keys = ", ".join(literal(k) for k, _ in pairs)
    values = ", ".join(literal(v) for _, v in pairs)
    return f"hstore(array[{keys}]::text[], array[{values}]::text[])".replace("{", "{{").replace("}", "}}")


#: 20 keys (HashMap resizes 16 -> 32 buckets), odd characters, keys with equal String.hashCode
#: ("Aa", "BB"), a character outside the BMP (two UTF-16 units in the hash).
HSTORE_20 = [(f"key{i}", str(i * 7)) for i in range(12)] + [
    ("Aa", "1"),
    ("BB", None),
    ("a b", 'x"y'),
    ("q'uote", "back\\slash"),
    ("ü", "✓"),
    ("😀", "tab\tnew\nline"),
    ("", "empty key"),
    ("ctl\u0001", "z"),
]
#: 60 keys: 128 buckets after three resizes, colliding hashes ("AaAa", "BBBB", "AaBB", "BBAa").
HSTORE_60 = [(f"k{i:02d}", f"v{i}") for i in range(56)] + [("AaAa", "1"), ("BBBB", "2"), ("AaBB", None), ("BBAa", "4")]

ROWS = {
    "numbers": [
        "({id}, 1, 2, 3, 1, 2, 3, 1.5, 2.25, 12345.678, 42, 3.14159265358979, 1234567890123456789012345678.0123456789,"
        " 12.34, true, 4000000000, 7)",
        "({id}, -32768, -2147483648, -9223372036854775808, 32767, 2147483647, 9223372036854775807,"
        " 'NaN', '-Infinity', -0.001, -999999999999, 'NaN', -0.0000000001, -92233720368547758.08, false, 0,"
        " 2147483647)",
        "({id}, null, null, null, 5, 5, 5, null, null, null, null, null, null, null, null, null, null)",
    ],
    "texts": [
        "({id}, 'text ü ✓', 'varchar', 'ab', 'x', 'name', 'CiText', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
        " '{{\"a\": [1, 2.50]}}', '{{\"b\": null, \"a\": 1}}', '<a x=\"1\">t</a>', 'happy', 'short',"
        " 'a=>1, \"b c\"=>NULL', 'top.science.astronomy')",
        "({id}, '', '', '', ' ', '', '', '00000000-0000-0000-0000-000000000000', '[]', '\"s\"',"
        " '<!-- c -->', 'ok ''quoted''', '', '', '')",
        "({id}, null, null, null, null, null, null, null, null, null, null, null, null, null, null)",
    ],
    "temporal": [
        "({id}, '2024-02-29', '13:37:03.123456', '13:37:03.5', '13:37:03.1234', '13:37:03.5+02', '13:37:03.123-05:30',"
        " '2024-02-29 13:37:03.123456', '2024-02-29 13:37:03.5', '2024-02-29 13:37:03.1239',"
        " '2024-02-29 13:37:03.5+02', '2024-02-29 13:37:03.5+02', '2024-02-29 13:37:03.1234+02',"
        " '1 year 2 months 3 days 04:05:06.5', '1 year 2 months', '12.3456 seconds')",
        "({id}, '0044-03-15 BC', '00:00:00', '23:59:59', '24:00:00', '00:00:00+14', '23:59:59.999-12',"
        " '1900-01-01 00:00:00', '9999-12-31 23:59:59', '1970-01-01 00:00:00.001', '0001-01-01 00:00:00+00',"
        " '10000-06-01 00:00:00+00', '1969-12-31 23:59:59.999+00', '-3 days -00:00:01', '-1 year', '-0.5 seconds')",
        "({id}, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)",
    ],
    "bits": [
        "({id}, '\\x00ff10', B'1', B'101', B'10000001', B'101010101010', ('1' || repeat('0', 62) || '1')::bit(64),"
        " B'1011', B'11111111111')",
        "({id}, '', B'0', B'000', B'00000000', B'000000000000', repeat('1', 64)::bit(64), B'', B'0')",
        "({id}, null, null, null, null, null, null, null, null)",
    ],
    "geometric": [
        "({id}, '(1.5,-2)', '((0,0),(1,2))', '<(1,2),3>', '{{1,-1,0}}', '[(0,0),(1,1)]', '[(0,0),(1,1),(2,0)]',"
        " '((0,0),(0,1),(1,0))')",
        "({id}, '(0,0)', '((-1,-1),(-1,-1))', '<(0,0),0>', '{{0,1,-2.5}}', '[(1,1),(1,1)]', '((0,0))',"
        " '((1e10,-1e-10))')",
        "({id}, null, null, null, null, null, null, null)",
    ],
    "network": [
        "({id}, '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05')",
        "({id}, '::1', '2001:db8::/32', '00:00:00:00:00:00', 'ff:ff:ff:ff:ff:ff:ff:ff')",
        "({id}, null, null, null, null)",
    ],
    "ranges": [
        "({id}, '[1,10)', '(1,100]', '[1.5,2.5]', '[2024-01-01 00:00,2024-02-01 00:00)',"
        " '[2024-01-01 00:00+00,2024-02-01 00:00+02)', '[2024-01-01,2024-02-01]')",
        "({id}, 'empty', '(,)', '(,0)', '[-infinity,infinity]', 'empty', '[2024-01-01,)')",
        "({id}, null, null, null, null, null, null)",
    ],
    "arrays": [
        '({id}, \'{{1,NULL,3}}\', \'{{"x y",NULL,"","a,b","q\\"t"}}\', \'{{1.5,-2.25}}\', \'{{1,2.5,NaN}}\','
        " '{{t,f}}', '{{2024-02-29,\"0044-03-15 BC\"}}', '{{\"2024-02-29 13:37:03.5\"}}',"
        " '{{\"2024-02-29 13:37:03.5+02\"}}', '{{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}}', array['{{\"a\": 1}}'::jsonb],"
        " '{{sad,happy}}', '{{{{1,2}},{{3,4}}}}', '{{ab,cd}}', array['\\x00ff'::bytea], '{{1.5,Infinity}}',"
        ' \'{{"1 day","-2 hours"}}\')',
        "({id}, '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}',"
        " '{{}}', '{{}}', '{{}}', '{{}}')",
        "({id}, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)",
    ],
    "misc": [
        "({id}, 'a fat cat', 'fat & cat', '16/B374D848', '12345', true)",
        "({id}, '', 'a', '0/0', '0', false)",
        "({id}, null, null, null, null, null)",
    ],
    "hstores": [
        f"({{id}}, {_hstore(HSTORE_20)})",
        f"({{id}}, {_hstore(HSTORE_60)})",
        "({id}, null)",
    ],
    "arrays_more": [
        "({id}, '{{1,2.50,-0.001,100}}', '{{1,Infinity}}', '{{1,-2}}', '{{\"2024-02-29 13:37:03.5+02\"}}',"
        " '{{\"2024-02-29 13:37:03.5+02\"}}', '{{\"2024-02-29 13:37:03.5\"}}', '{{13:37:03.5}}', '{{13:37:03.5+02}}',"
        " '{{1.5,NaN,-Infinity,0.1}}', '{{1,-2}}', '{{4000000000}}', '{{ab,c}}', '{{192.168.0.1/24}}',"
        " '{{\"[1,10)\"}}',"
        " '{{CiText}}', '{{a.b}}', array['a=>1'::hstore], '{{101,000}}', '{{1,0}}', '{{12.34}}', '{{nm}}', '{{101}}',"
        " array['<a/>'::xml], array['(1,2)'::point], '{{1,2}}', '{{0/1}}')",
        "({id}, '{{0.000}}', '{{-Infinity}}'" + ", '{{}}'" * 24 + ")",
        "({id}" + ", null" * 26 + ")",
    ],
    "numbers_more": [
        "({id}, 1.500, 'Infinity', 0.1, 1e308, 100, '-0.01')",
        "({id}, 100, '-Infinity', '-Infinity', '-0', -12, 0)",
        "({id}, 0.000, null, null, null, null, null)",
    ],
    "unknowns": [
        "({id}, '12345', '10:20:10,14', '$.a[*] ? (@ > 1)', '{{[1,3),[5,7)}}', 'pg_class')",
        "({id}, '0', '1:1:', '$', '{{}}', '-')",
        "({id}, null, null, null, null, null)",
    ],
    "bits_more": [
        "({id}, B'1', B'1', B'100000000', B'01')",
        "({id}, B'0', B'0', B'000000001', B'10')",
        "({id}, null, null, null, null)",
    ],
    "temporal_more": [
        "({id}, '2024-02-29 13:37:03.56+02', '2024-02-29 13:37:03+02', '13:37:03.5+02', '1.5 months 0.000001 seconds',"
        " '0044-03-15 13:37:03 BC', '0044-03-15 13:37:03+00 BC', 'infinity', 'infinity', 'infinity', 'infinity')",
        "({id}, '1970-01-01 00:00:00+00', '1970-01-01 00:00:00.000001+00', '00:00:00+00',"
        " '-1 years -2 mons +3 days -04:05:06.789', '0001-12-31 23:59:59 BC', '0001-12-31 23:59:59.5+00 BC',"
        " '-infinity', '-infinity', '-infinity', '-infinity')",
        "({id}, null, null, null, null, null, null, null, null, null, null)",
    ],
    "geometric_more": [
        "({id}, '(NaN,Infinity)', '((0,0),(1,1),(2,0))', '((0,0),(1,0),(0,0))', '((3,4),(1,2))', '<(0.5,-1e-5),1e20>')",
        "({id}, '(-0,1e-300)', '[(1,2)]', '((5,5),(6,6))', '((1,1),(1,1))', '<(1,1),0.5>')",
        "({id}, null, null, null, null, null)",
    ],
}

TYPED_TABLES = tuple(ROWS)


def insert_rows(table: str, first_id: int) -> list[str]:
    return [f"insert into {table} values {row.format(id=first_id + i)}" for i, row in enumerate(ROWS[table])]


def snapshot_statements() -> list[str]:
    """The rows that exist before capture starts."""
    statements = [stmt for table in TYPED_TABLES for stmt in insert_rows(table, 1)]
    return [
        *statements,
        "insert into toasted values (1, 'snap', repeat('0123456789', 300), decode(repeat('ab', 3000), 'hex'),"
        " array[repeat('x', 3000)], jsonb_build_object('k', repeat('y', 3000)))",
        "insert into full_identity values (1, 'a', repeat('z', 3000))",
        "insert into no_key values ('keyless', 1)",
        "insert into composite_key values (1, 'one', 'v')",
        "insert into not_null (id, plain, v, opt) values (1, 1, 'v', 'o')",
    ]


#: Streamed after every capture runs. Each entry is one transaction (a list: several statements).
STREAM: list[list[str]] = [
    *[[stmt] for table in TYPED_TABLES for stmt in insert_rows(table, 11)],
    # Updates that touch every column kind, then deletes.
    ["update numbers set f8 = f8 + 1, n = n * 2, m = m + 1::money, nv = 1e-20 where id = 11"],
    ["update texts set t = t || ' changed', jb = jb || '{\"c\": true}' where id = 11"],
    ["update temporal set ts = ts + interval '1 day', iv = iv * 2 where id = 11"],
    ["update bits set b8 = ~b8, vb = vb || B'0' where id = 11"],
    ["update arrays set ai = ai || 4, at = '{}' where id = 11"],
    ["delete from numbers where id = 12", "delete from texts where id = 12"],
    # TOAST: a streamed insert carries the value; an update of another column does not (unchanged
    # TOASTed columns are placeholders); an update of the TOASTed column carries it again.
    [
        "insert into toasted values (2, 'first', repeat('0123456789', 300), decode(repeat('cd', 3000), 'hex'),"
        " array[repeat('w', 3000)], jsonb_build_object('k', repeat('v', 3000)))"
    ],
    ["update toasted set note = 'second' where id = 2"],
    ["update toasted set big = repeat('9', 3000), note = 'third' where id = 2"],
    ["update toasted set note = 'snapshot row' where id = 1"],
    ["delete from toasted where id = 2"],
    # REPLICA IDENTITY FULL: before images on update and delete, TOASTed values included.
    ["insert into full_identity values (2, 'b', repeat('q', 3000))"],
    ["update full_identity set v = 'c' where id = 2"],
    ["delete from full_identity where id = 2"],
    # No primary key: a null key. Replica identity nothing. (PostgreSQL refuses updates and
    # deletes of both while a publication publishes them.)
    ["insert into no_key values ('keyless 2', 2)"],
    # No primary key but REPLICA IDENTITY FULL: updates and deletes with whole before images,
    # a null key, and no tombstone (a deliberate deviation: oracle.py's POSTGRES_RULES).
    ["insert into keyless_full values ('k', 1)"],
    ["update keyless_full set n = 2 where v = 'k'"],
    ["delete from keyless_full where v = 'k'"],
    ["insert into nothing_identity values (1, 'n')"],
    # NOT NULL columns missing from a key-only old tuple: their default, else the type's fallback.
    ["insert into not_null (id, plain, v, opt) values (2, 2, 'w', 'p')"],
    ["update not_null set plain = 3 where id = 2"],
    ["delete from not_null where id = 2"],
    ["update not_null set id = 3 where id = 1"],
    # Primary-key changes: delete + tombstone + create, single and composite keys.
    ["update numbers set id = 20 where id = 11"],
    ["update composite_key set b = 'uno' where a = 1"],
    # A multi-statement transaction across tables, then TRUNCATE (op=t when not skipped).
    ["insert into composite_key values (2, 'two', 'x')", "insert into no_key values ('in tx', 9)"],
    ["truncate composite_key"],
    # Logical decoding messages: in a transaction (with its id), and outside one.
    ["insert into no_key values ('with a message', 10)", "select pg_logical_emit_message(true, 'app', 'in a tx')"],
    ["select pg_logical_emit_message(false, 'app', '\\x00ff'::bytea)"],
    ["insert into composite_key values (3, 'three', 'y')"],
    # One transaction over five tables, some several times, with a key change and a delete: the
    # transaction metadata's per-table order and the order of its END's data_collections.
    [
        "insert into no_key values ('many', 11)",
        "insert into composite_key values (4, 'four', 'z')",
        "insert into nothing_identity values (2, 'm')",
        "update composite_key set v = 'zz' where a = 4",
        "insert into no_key values ('many 2', 12)",
        "insert into keyless_full values ('m', 3)",
        "update composite_key set a = 5 where a = 4",
        "delete from full_identity where id = 1",
    ],
]

#: The last transaction: once each capture emitted it, it has emitted everything before it.
MARKER = "insert into oracle_marker values (1)"
