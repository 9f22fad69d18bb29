"""The check that a snapshot filter (``additional-conditions``) stays inside the parentheses the
engine puts around it, read the way the database's lexer reads it (ADR 0007).

A filter is SQL, as in Debezium, pasted into ``... where (<filter>) and <bounds> ...``. The
check scans it as the server would, string by string: outside strings, quoted identifiers and
dollar quotes it refuses ``;``, every comment start and a ``)`` closing what the filter did not
open, and it refuses a quote left open (it would pair with a quote of the engine's query).
Where backslash escapes depend on a server setting (MySQL's ``sql_mode``, PostgreSQL's
``standard_conforming_strings``) the filter is scanned under each setting and must pass all:
the setting can differ per session, role or database, and a mismatch between our reading and
the server's is exactly how a quote gets smuggled (``'\\'' ) union select ... ('\\''``). What the
filter is beyond that - an expression, not a query - the server decides when the source parses
``select 1 from t where (<filter>) limit 0``.

The scan works on characters: both sources talk to their servers in UTF-8 (PostgreSQL lexes
after converting to the server's encoding; the MySQL connections are utf8mb4), where no ASCII
byte is ever part of another character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_cdc.engine.signals.signal import SignalError

#: PostgreSQL's dollar-quote delimiter (``dolqdelim`` in its scan.l).
_DOLLAR_DELIMITER = re.compile(r"\$([A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*)?\$")
#: A word, as both lexers read it: in PostgreSQL ``$`` continues an identifier (``a$$`` is one
#: word, no dollar quote), and only a word that is exactly ``E`` starts an escape string.
_WORD = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*")
_NUMBER = re.compile(r"[0-9][0-9.]*")


@dataclass(frozen=True)
class Quote:
    """A quoting character (it also closes; doubled inside, it stands for itself)."""

    char: str
    what: str  # for messages: "string", "identifier"


@dataclass(frozen=True)
class Reading:
    """How the server reads quotes under some of its settings: which quote characters take
    backslash escapes (``setting`` names when, for messages)."""

    setting: str
    backslash_in: str


@dataclass(frozen=True)
class FilterSyntax:
    """What a database's lexer hides a ``;`` or a parenthesis in; each source declares its own.
    A filter must pass every reading: the settings can differ per session, role or database."""

    dialect: str
    quotes: tuple[Quote, ...]
    comments: tuple[str, ...]
    readings: tuple[Reading, ...]
    #: PostgreSQL: a word of one of these letters right before a ' opens a string that takes
    #: backslash escapes whatever the setting (``E'...'``), or never does (``B'...'``, ``X'...'``).
    escape_prefixes: str = ""
    plain_prefixes: str = ""
    #: PostgreSQL: a ``$`` that starts a token opens ``$$...$$`` or ``$tag$...$tag$``. Elsewhere
    #: it is refused: MySQL 9 reads dollar quotes where older servers read a word.
    dollar_quotes: bool = False


class _Refused(Exception):
    def __init__(self, problem: str, at: int, hint: str = "") -> None:
        super().__init__(problem)
        self.problem, self.at, self.hint = problem, at, hint


def check_single_predicate(table: str, predicate: str, syntax: FilterSyntax) -> None:
    """SignalError unless ``predicate`` stays one parenthesised part of a WHERE clause under
    every reading of ``syntax`` (see the module's docstring); the message names what is wrong,
    where, and - when another reading passes - under which server setting."""
    refusals = []
    for reading in syntax.readings:
        try:
            _scan(predicate, syntax, reading)
        except _Refused as exc:
            refusals.append((reading, exc))
    if not refusals:
        return
    reading, refused = refusals[0]
    when = ""
    if len(refusals) < len(syntax.readings):
        when = (
            f" when the server reads it with {reading.setting} (a doubled quote reads the same whatever the "
            "setting, a backslash next to a quote does not)"
        )
    raise SignalError(
        f"filter {predicate!r} for {table} is not a single predicate: {refused.problem} at character "
        f"{refused.at + 1}{refused.hint}{when}. Outside quotes a {syntax.dialect} filter may hold no ';', no "
        "comment and no ')' closing what it did not open (write e.g. \"color = 'blue' and id > 100\")"
    )


def _scan(text: str, syntax: FilterSyntax, reading: Reading) -> None:
    quotes = {q.char: q for q in syntax.quotes}
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char in quotes:
            i = _close(text, i, quotes[char], char in reading.backslash_in)
        elif char == "$":
            i = _close_dollar(text, i, syntax)
        elif word := _WORD.match(text, i):
            i = word.end()
            prefix = word.group() if len(word.group()) == 1 and text.startswith("'", i) else ""
            if prefix and prefix in syntax.escape_prefixes + syntax.plain_prefixes:
                escapes = prefix in syntax.escape_prefixes
                i = _close(text, i, Quote("'", "escape string" if escapes else "string"), escapes)
        elif number := _NUMBER.match(text, i):
            i = number.end()  # so the E of 1e'...' starts a word, as PostgreSQL before 15 reads it
        else:
            _refuse_outside_quotes(text, i, syntax)
            depth += (char == "(") - (char == ")")
            if depth < 0:
                raise _Refused("')' closes a parenthesis the filter did not open", i)
            i += 1
    if depth:
        raise _Refused(f"{depth} '(' left open", len(text))


def _refuse_outside_quotes(text: str, i: int, syntax: FilterSyntax) -> None:
    if text[i] == ";":
        raise _Refused("';' ends the statement", i)
    if text[i] == "\0":
        raise _Refused("a NUL character", i)
    for comment in syntax.comments:
        if text.startswith(comment, i):
            hint = " (write '- -' for two minus signs)" if comment == "--" else ""
            raise _Refused(f"{comment!r} starts a comment", i, hint)


def _close(text: str, start: int, quote: Quote, backslash: bool) -> int:
    """The index after the quote opened at ``start`` (its char) closes."""
    i = start + 1
    while i < len(text):
        char = text[i]
        if backslash and char == "\\":
            i += 2
        elif char == quote.char:
            if not text.startswith(quote.char, i + 1):
                return i + 1
            i += 2  # a doubled quote stands for itself
        else:
            i += 1
    raise _Refused(f"the {quote.what} opened by {quote.char} is never closed", start)


def _close_dollar(text: str, start: int, syntax: FilterSyntax) -> int:
    if not syntax.dollar_quotes:
        raise _Refused("a '$' starting a word (MySQL 9 reads a dollar quote there: quote the name with `)", start)
    delimiter = _DOLLAR_DELIMITER.match(text, start)
    if delimiter is None:
        raise _Refused("a '$' that opens no dollar quote (parameters such as $1 have no value here)", start)
    end = text.find(delimiter.group(), delimiter.end())
    if end < 0:
        raise _Refused(f"the dollar quote opened by {delimiter.group()} is never closed", start)
    return end + len(delimiter.group())
