"""The one DDL reader (``sources/mysql/ddl``): its scanner, its ALTER clauses, and the two models
it feeds - the schema history's tables and Debezium's ``tableChanges`` - reading a statement
the same way."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.sources.mysql import ddl, table_changes
from airflow_cdc.engine.sources.mysql.ddl.clauses import (
    AddColumns,
    AddPrimaryKey,
    NoColumnChange,
    Placement,
    RedefineColumn,
    RenameColumn,
    Unread,
    read_clauses,
)
from airflow_cdc.engine.sources.mysql.ddl.statements import truncated_table
from airflow_cdc.engine.sources.mysql.ddl.tokens import closing, split_top_level, strip_comments, tokens


def test_literals_are_read_as_mysql_reads_them() -> None:
    """A backslash escapes a quote in '...' (not in backticks), a doubled quote is a quote, and
    commas, parentheses and comment markers inside a literal are text."""
    assert split_top_level(r"a varchar(5) default 'x\', (y', b int") == [r"a varchar(5) default 'x\', (y'", "b int"]
    assert split_top_level("`a``,b` int, c int") == ["`a``,b` int", "c int"]
    assert closing("(a enum('(', ')'), b) rest") == 20
    assert [t.kind for t in tokens(r"'it\'s' `q` b'01' 1.5 word (g) ,")] == [
        *("string", "ident", "bits", "number", "word", "group", "other")
    ]


def test_comments_go_and_literals_that_look_like_comments_stay() -> None:
    sql = "create table t (a int default 5 -- note\n, b varchar(3) default '#1' /* c */, c text comment 'x -- y')"
    assert strip_comments(sql) == (
        "create table t (a int default 5  \n, b varchar(3) default '#1'  , c text comment 'x -- y')"
    )
    assert strip_comments("/*!40000 ALTER TABLE `t` DISABLE KEYS */;") == "ALTER TABLE `t` DISABLE KEYS ;"


def test_an_alter_table_is_read_clause_by_clause() -> None:
    clauses = read_clauses(
        "add column w int after `v`, add (x int, y text), rename column if exists a to b, "
        "modify v text first, add constraint pk primary key (id, v(5) desc), drop index i, partition by hash(id)"
    )
    assert clauses == [
        AddColumns((("w", "int"),), Placement(after="v")),
        AddColumns((("x", "int"), ("y", "text")), Placement()),
        RenameColumn("a", "b"),
        RedefineColumn("v", "v", "text", Placement(first=True)),
        AddPrimaryKey(("id", "v")),
        NoColumnChange(),
        Unread("partition by hash(id)"),
    ]


STATEMENT = r"""CREATE TABLE `shop`.`t` (
  `id` int NOT NULL,
  note varchar(20) DEFAULT 'it\'s, #1', -- a comment
  code char(3) COMMENT 'a (b), c -- d',
  CONSTRAINT PRIMARY KEY (`id`, note(4))
) DEFAULT CHARSET=latin1"""


def test_both_models_read_one_statement_alike() -> None:
    changes = ddl.apply(STATEMENT, "shop", {})
    assert isinstance(changes, ddl.Changes)
    history = changes.tables[("shop", "t")]
    debezium = table_changes.create_table("shop", "t", STATEMENT[STATEMENT.index("(") :], None)
    assert [c.name for c in history.columns] == [c.name for c in debezium.columns] == ["id", "note", "code"]
    assert list(history.key) == debezium.key == ["id", "note"]
    assert history.charset == debezium.charset == "latin1"
    assert history.columns[1].default == r"'it\'s, #1'" and debezium.columns[1].default == r"it\'s, #1"
    assert debezium.columns[2].comment == "a (b), c -- d"


@pytest.mark.parametrize(
    ("alter", "columns"),
    [
        ("alter table t add (x int, y int)", ["id", "note", "code", "x", "y"]),
        ("alter table t rename column if exists code to kind", ["id", "note", "kind"]),
        ("alter table t add column z int after note, drop column code", ["id", "note", "z"]),
    ],
)
def test_an_alter_changes_both_models_alike(alter: str, columns: list[str]) -> None:
    changes = ddl.apply(STATEMENT, "shop", {})
    assert isinstance(changes, ddl.Changes)
    altered = ddl.apply(alter, "shop", changes.tables)
    assert isinstance(altered, ddl.Changes)
    debezium = table_changes.create_table("shop", "t", STATEMENT[STATEMENT.index("(") :], None)
    after = table_changes.alter(debezium, alter.split(" ", 3)[3])
    assert after is not None
    assert [c.name for c in altered.tables[("shop", "t")].columns] == [c.name for c in after.columns] == columns


def test_key_words_glued_to_their_column_list_are_keys_not_columns() -> None:
    table = table_changes.create_table("shop", "t", "(a int not null, b int, INDEX(b), UNIQUE(a))", "utf8mb4")
    assert [c.name for c in table.columns] == ["a", "b"] and table.key == ["a"]


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ("truncate table audit_log", ("shop", "audit_log")),
        ("TRUNCATE `other`.`Audit Log`;", ("other", "Audit Log")),
        ("truncate audit_log", ("shop", "audit_log")),  # TABLE is optional in MySQL
        ("/* by a tool */ truncate table x", ("shop", "x")),
        ("SET STATEMENT max_statement_time=60 FOR TRUNCATE TABLE x", ("shop", "x")),
        ("truncate table x, y", None),  # not MySQL: one table per TRUNCATE
        ("create table truncate_me (id int)", None),
    ],
)
def test_a_truncate_names_the_table_it_empties(sql: str, table: tuple[str, str] | None) -> None:
    assert truncated_table(sql, "shop") == table
