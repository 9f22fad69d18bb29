"""The check that keeps a snapshot filter (``additional-conditions``) inside the parentheses the
engine puts around it, read as each database's lexer reads it (engine/snapshots/filter_check.py).
Until issue 26 it knew only single quotes: MySQL's double-quoted strings and backslash escapes,
and PostgreSQL's dollar quotes and E'' strings, hid a ')' that closed the engine's parenthesis.
tests/integration/test_snapshot_filters.py shows on the real servers what these filters do."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.filter_check import FilterSyntax, check_single_predicate
from airflow_cdc.engine.sources.mysql.incremental import FILTER_SYNTAX as MYSQL
from airflow_cdc.engine.sources.postgres.incremental import FILTER_SYNTAX as POSTGRES

UNION = " ) union all select id, name from secret where (true or "

#: Filters the single-quote-only check let through, each of which, on the real server, closes the
#: engine's parenthesis and reads another table (tests/integration/test_snapshot_filters.py).
MYSQL_BYPASSES = {
    "a ')' in a double-quoted string": f'name = "("{UNION}")" = "x"',
    "a ' in a double-quoted string": f'name = "\'"{UNION}name = "\'"',
    "a backslash-escaped quote": f"name = '\\''{UNION}name = '\\''",
}
POSTGRES_BYPASSES = {
    "a ' in a dollar quote": f"name = $$'$${UNION}name = $$'$$",
    "a backslash-escaped quote in an E'' string": f"name = E'\\''{UNION}name = E'\\''",
}


def refusal(syntax: FilterSyntax, predicate: str) -> str:
    with pytest.raises(SignalError) as refused:
        check_single_predicate("db.t", predicate, syntax)
    message = str(refused.value)
    assert message.startswith(f"filter {predicate!r} for db.t is not a single predicate: ")
    assert "write e.g. \"color = 'blue' and id > 100\"" in message
    return message


@pytest.mark.parametrize("predicate", MYSQL_BYPASSES.values(), ids=MYSQL_BYPASSES.keys())
def test_mysql_filters_that_closed_the_engines_parenthesis_are_refused(predicate: str) -> None:
    assert "')' closes a parenthesis the filter did not open at character" in refusal(MYSQL, predicate)


@pytest.mark.parametrize("predicate", POSTGRES_BYPASSES.values(), ids=POSTGRES_BYPASSES.keys())
def test_postgres_filters_that_closed_the_engines_parenthesis_are_refused(predicate: str) -> None:
    assert "')' closes a parenthesis the filter did not open at character 14" in refusal(POSTGRES, predicate)


@pytest.mark.parametrize(
    ("predicate", "problem"),
    [
        ('a = "x;" or 1=1 -- "', "'--' starts a comment at character 17 (write '- -' for two minus signs)"),
        ('a = "x" or 1=1 # "', "'#' starts a comment at character 16"),
        ("a = 1 /*! or 1=1 */", "'/*' starts a comment at character 7"),
        ('a = "x"; drop table t', "';' ends the statement at character 8"),
        ("a = `col;umn` or 1=1; select 1", "';' ends the statement at character 21"),
        ('a = "unterminated', 'the string opened by " is never closed at character 5'),
        ("a = `unterminated", "the identifier opened by ` is never closed at character 5"),
        ("a = 'x\\'", "the string opened by ' is never closed at character 5"),
        ("(a = 1", "1 '(' left open at character 7"),
        ("a = 1 or 1 = (1", "1 '(' left open"),
        ("a = '\0' or b = \0 1", "a NUL character at character 16"),
    ],
)
def test_mysql_separators_comments_and_open_quotes_outside_strings_are_refused(predicate: str, problem: str) -> None:
    assert problem in refusal(MYSQL, predicate)


@pytest.mark.parametrize(
    ("predicate", "problem"),
    [
        ("a = 1 -- ", "'--' starts a comment at character 7"),
        ("a = 1 /* x */", "'/*' starts a comment at character 7"),
        ("a = $tag$ x $tag; drop table t", "the dollar quote opened by $tag$ is never closed at character 5"),
        ("a = $1", "a '$' that opens no dollar quote"),
        ("a = 1; select 1", "';' ends the statement at character 6"),
        ('"a)" = 1) or (1 = 1', "')' closes a parenthesis the filter did not open at character 9"),
        ("a = E'x\\'", "the escape string opened by ' is never closed at character 6"),
    ],
)
def test_postgres_separators_comments_and_open_quotes_outside_strings_are_refused(predicate: str, problem: str) -> None:
    assert problem in refusal(POSTGRES, predicate)


@pytest.mark.parametrize(
    "predicate",
    [
        "color = 'blue' and id > 100",
        "name = 'semi;colon' or name = \"dash -- dash\" or name = 'hash # /* star'",
        'name in (\'(\', ")", \'it\'\'s\', "say ""hi""")',
        "name = 'back\\\\slash'",  # an escaped backslash reads the same with and without escapes
        "`odd ( name` = 1 and `tick``s;` = 2",
        "a - -1 > 0 and b / 2 * 3 < 4",
        "id in (select id from t where name like '%x%')",
        "name = _utf8mb4'x;y' collate utf8mb4_bin and hex = x'2d2d'",
    ],
)
def test_mysql_filters_with_quoted_separators_pass(predicate: str) -> None:
    check_single_predicate("db.t", predicate, MYSQL)


@pytest.mark.parametrize(
    "predicate",
    [
        "color = 'blue' and id > 100",
        "name = 'semi;colon' or name = 'dash -- dash /* star'",
        "name = $$it's; -- ) $$ or name = $x$ $$ ) $x$",
        "name = E'it\\'s; )' or \"odd ( column\" = 1",
        "a$$ = 1",  # an identifier: PostgreSQL reads no dollar quote after a word
        "created < date'2020-01-01' and n::text <> 'x' and n # 1 = 0",  # '#' is xor here
        "1e'x' = name",  # read as 1 e'x' (an escape string before PostgreSQL 15, an error since)
        "name = U&'d\\0061t\\+000061'",
    ],
)
def test_postgres_filters_with_quoted_separators_pass(predicate: str) -> None:
    check_single_predicate("public.t", predicate, POSTGRES)


@pytest.mark.parametrize(
    ("syntax", "predicate", "when"),
    [
        (MYSQL, "name = 'it\\'s'", "when the server reads it with sql_mode NO_BACKSLASH_ESCAPES"),
        (MYSQL, 'name = "it\\"s"', "when the server reads it with sql_mode ANSI_QUOTES"),
        # Without backslash escapes '\' is a whole string and the rest a comment:
        (MYSQL, "name = '\\' or 1 = 1 -- '", "when the server reads it with sql_mode NO_BACKSLASH_ESCAPES"),
        # With standard_conforming_strings on (the default) '\' is a whole string, and ')' closes:
        (POSTGRES, "name = '\\') or (true or name = '", "when the server reads it with standard_conforming_strings on"),
        (POSTGRES, "name = 'C:\\'", "when the server reads it with standard_conforming_strings off"),
    ],
)
def test_a_filter_that_a_server_setting_reads_otherwise_is_refused_naming_the_setting(
    syntax: FilterSyntax, predicate: str, when: str
) -> None:
    message = refusal(syntax, predicate)
    assert when in message
    assert "(a doubled quote reads the same whatever the setting, a backslash next to a quote does not)" in message


def test_postgres_bit_and_hex_strings_take_no_backslash_escapes_whatever_the_setting() -> None:
    check_single_predicate("public.t", "flags = B'\\' and n > 0", POSTGRES)  # B'\' is a whole string
    assert "')' closes a parenthesis" in refusal(POSTGRES, "flags = X'\\' ) or (true")
    # Only a word of one letter is a prefix: be'...' is the word be, then a plain string.
    assert "standard_conforming_strings on" in refusal(POSTGRES, "be'\\' ) or (true or be = '")


def test_mysql_refuses_a_dollar_that_starts_a_word() -> None:
    """MySQL 9 reads $$...$$ as a dollar quote, MariaDB and older MySQL as a word."""
    check_single_predicate("db.t", "a$b = 1 and `$c` = 2", MYSQL)
    assert "a '$' starting a word" in refusal(MYSQL, "$$ ) or (1 = 1 $$ = 1")
