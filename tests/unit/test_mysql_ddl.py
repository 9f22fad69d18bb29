"""DDL applied to table definitions without a server, and the schema history file: the column
list right after ADD/DROP/RENAME/MODIFY/CHANGE COLUMN and CREATE/DROP/RENAME TABLE, and a
restart reading the history up to the committed version."""

from __future__ import annotations

from pathlib import Path

from airflow_cdc.engine.sources.mysql import ddl
from airflow_cdc.engine.sources.mysql.schema import SchemaHistory

CREATE = """CREATE TABLE `shop`.`t` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  v varchar(20) DEFAULT 'a,b',  -- a comment, with a comma
  price decimal(10,2) unsigned,
  at datetime(3),
  flag enum('x','y''s'),
  PRIMARY KEY (`id`),
  KEY v_idx (v(5))
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""


def table_after(*statements: str) -> ddl.Table:
    tables: dict[tuple[str, str], ddl.Table] = {}
    for statement in statements:
        changes = ddl.apply(statement, "shop", tables)
        assert isinstance(changes, ddl.Changes), statement
        for key in changes.dropped:
            tables.pop(key, None)
        tables.update(changes.tables)
    return tables[("shop", "t")] if ("shop", "t") in tables else next(iter(tables.values()))


def names(table: ddl.Table) -> list[str]:
    return [c.name for c in table.columns]


def test_create_table_reads_columns_types_and_key_like_information_schema() -> None:
    t = table_after(CREATE)
    assert names(t) == ["id", "v", "price", "at", "flag"] and t.key == ("id",) and t.charset == "latin1"
    by = {c.name: c for c in t.columns}
    assert (by["id"].data_type, by["id"].nullable) == ("int", False)
    assert (by["v"].data_type, by["v"].length, by["v"].charset) == ("varchar", 20, "latin1")
    assert (by["price"].precision, by["price"].scale, by["price"].unsigned) == (10, 2, True)
    assert (by["at"].data_type, by["at"].fsp) == ("datetime", 3)
    assert by["flag"].column_type == "enum('x','y''s')"


def test_alter_table_column_changes_keep_the_column_list_right() -> None:
    t = table_after(
        CREATE,
        "alter table t add column w int after v, add z bigint unsigned first",
        "ALTER TABLE shop.t DROP COLUMN price, RENAME COLUMN at TO happened",
        "alter table t modify v text character set utf8mb4 not null",
        "alter table t change column w w2 smallint after happened",
    )
    assert names(t) == ["z", "id", "v", "happened", "w2", "flag"]
    by = {c.name: c for c in t.columns}
    assert (by["v"].data_type, by["v"].charset, by["v"].nullable) == ("text", "utf8mb4", False)
    assert by["z"].unsigned and by["w2"].data_type == "smallint"


def test_table_renames_drops_and_key_changes() -> None:
    t = table_after(CREATE, "rename table t to u", "alter table u drop primary key, add primary key (v)")
    assert (t.name, t.key) == ("u", ("v",))
    tables = {("shop", "t"): table_after(CREATE)}
    dropped = ddl.apply("DROP TABLE IF EXISTS t, other", "shop", tables)
    assert isinstance(dropped, ddl.Changes) and ("shop", "t") in dropped.dropped


def test_what_changes_no_definition_is_none_and_what_is_not_understood_is_unknown() -> None:
    tables = {("shop", "t"): table_after(CREATE)}
    assert ddl.apply("create index i on t (v)", "shop", tables) is None
    assert ddl.apply("truncate table t", "shop", tables) is None
    assert ddl.apply("grant select on shop.* to x", "shop", tables) is None
    assert ddl.apply("alter table t partition by hash(id) partitions 4", "shop", tables) == ddl.Unknown(
        (("shop", "t"),)
    )
    assert ddl.apply("create table t2 like t", "shop", tables) == ddl.Unknown((("shop", "t2"),))


def test_the_history_file_recovers_the_committed_version_and_drops_later_lines(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    history = SchemaHistory(path, lambda db, t: db == "shop")
    history.tables = {("shop", "t"): table_after(CREATE)}
    history.version = 0
    path.write_text("")
    from airflow_cdc.engine.sources.mysql.schema import _line

    path.write_text(_line(0, "", {}, history.tables.values(), ()))
    assert history.apply(None, "alter table t add column w int", "shop", {"gtids": "0-1-7"})
    assert history.apply(None, "alter table t drop column v", "shop", {"gtids": "0-1-8"})
    assert not history.apply(None, "create index i on t (id)", "shop", {"gtids": "0-1-9"})
    assert history.version == 2

    again = SchemaHistory(path, lambda db, t: db == "shop")
    again.recover(None, 1)  # the offset of the second DDL was never committed
    assert names(again.tables[("shop", "t")]) == ["id", "v", "price", "at", "flag", "w"]
    assert len(path.read_text().splitlines()) == 2


def test_column_defaults_read_as_mariadb_writes_them() -> None:
    """COLUMN_DEFAULT as MariaDB's information_schema writes it (a zero date in a NOT NULL column
    streams as its default, converted: a column added by DDL needs it as much as one read from
    information_schema)."""
    t = table_after(
        CREATE,
        "alter table t add column d date not null default '2001-02-03', add n int DEFAULT NULL, add e int",
        "alter table t add column ts datetime(6) not null default '2000-01-01 00:00:00.500000', add k int default -5",
    )
    by = {c.name: c.default for c in t.columns}
    assert by["v"] == "'a,b'" and by["d"] == "'2001-02-03'" and by["n"] == "NULL" and by["e"] is None
    assert by["ts"] == "'2000-01-01 00:00:00.500000'" and by["k"] == "-5" and by["id"] is None
