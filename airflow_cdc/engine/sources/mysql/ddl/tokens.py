"""The one scanner of DDL text: quoted literals, parentheses, names, comments and tokens.

Quoted literals are read as MySQL and Debezium's lexer read them: a doubled quote stands for
itself, and inside ``'...'`` and ``"..."`` a backslash escapes the next character (not inside
backticks, where MySQL has no escapes). Everything that splits a statement at commas, finds a
closing parenthesis or cuts it into tokens goes through :func:`quoted_end`, so a comma, a
parenthesis or a quote inside a literal never counts as structure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

#: An identifier as written: quoted with backticks (doubled inside) or bare.
IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
#: A table name, with its database or without.
QUALIFIED = rf"(?:{IDENT}\s*\.\s*)?{IDENT}"
#: A string literal, single or double quoted.
STRING = r"(?:'(?:[^'\\]|''|\\.)*'|\"(?:[^\"\\]|\"\"|\\.)*\")"

_QUOTED = {
    "'": re.compile(r"'(?:[^'\\]|''|\\.)*'", re.S),
    '"': re.compile(r'"(?:[^"\\]|""|\\.)*"', re.S),
    "`": re.compile(r"`(?:[^`]|``)*`"),
}
_STRUCTURE = re.compile(r"['\"`(),]")


def quoted_end(text: str, start: int) -> int | None:
    """The index after the quoted literal opening at ``text[start]`` (a ``'``, ``"`` or
    backtick); None when it is not closed."""
    match = _QUOTED[text[start]].match(text, start)
    return match.end() if match else None


def _structure(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """Each parenthesis and comma outside quoted literals, with its index. An unclosed literal
    runs to the end of the text."""
    index = start
    while (found := _STRUCTURE.search(text, index)) is not None:
        ch, index = found.group(), found.start()
        if ch in _QUOTED:
            end = quoted_end(text, index)
            if end is None:
                return
            index = end
            continue
        yield index, ch
        index += 1


def closing(text: str, start: int = 0) -> int:
    """The index of the parenthesis closing the first one at or after ``start``; ValueError
    when there is none."""
    depth = 0
    for index, ch in _structure(text, start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced parentheses in {text[:80]!r}")


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and quoted literals, each part stripped
    (an empty last part left out)."""
    parts: list[str] = []
    begin = depth = 0
    for index, ch in _structure(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            parts.append(text[begin:index].strip())
            begin = index + 1
    if last := text[begin:].strip():
        parts.append(last)
    return parts


def unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def strip_quotes(text: str) -> str:
    """A string literal's text between its quotes, as written (escapes kept)."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def split_name(qualified: str, default_db: str) -> tuple[str, str]:
    """(database, table) of a name as written, ``default_db`` when it has no database."""
    parts = re.findall(IDENT, qualified)
    return (unquote(parts[0]), unquote(parts[1])) if len(parts) == 2 else (default_db, unquote(parts[0]))


#: A quote, a comment, or the start or end of a versioned comment.
_COMMENT_OR_QUOTE = re.compile(r"['\"`]|/\*!\d*\s*(?=.*?\*/)|/\*.*?\*/|\*/|(?:--\s|#)[^\n]*", re.S)


def strip_comments(sql: str) -> str:
    """``sql`` without its comments (each one a space), quoted literals left whole; a versioned
    comment (``/*!50100 ... */``) is code and keeps its text."""
    out: list[str] = []
    index = versioned = 0
    while (found := _COMMENT_OR_QUOTE.search(sql, index)) is not None:
        out.append(sql[index : found.start()])
        text, index = found.group(), found.end()
        if text in _QUOTED:
            index = quoted_end(sql, found.start()) or len(sql)
            out.append(sql[found.start() : index])
        elif text.startswith("/*!"):
            versioned += 1
        elif text == "*/":
            out.append("" if versioned else text)
            versioned = max(0, versioned - 1)
        else:
            out.append(" ")
    out.append(sql[index:])
    return "".join(out).strip()


class Token(NamedTuple):
    """One token of DDL text: its kind (``string``, ``bits``, ``ident``, ``number``, ``word``,
    ``group`` or ``other``), its text and where it ends in the text it was read from."""

    kind: str
    text: str
    end: int


_TOKEN = re.compile(
    r"\s*(?:(?P<quote>['\"`])|(?P<bits>[bBxX]'[^']*')|(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)"
    r"|(?P<word>[A-Za-z_$][\w$]*)|(?P<open>\()|(?P<other>[^\s(]))",
    re.S,
)


def tokens(text: str) -> list[Token]:
    """The tokens of ``text``; a parenthesised group is one ``group`` token, its parentheses
    kept (an unclosed one runs to the end)."""
    out: list[Token] = []
    index = 0
    while index < len(text):
        match = _TOKEN.match(text, index)
        if match is None or match.end() == index:
            break
        kind = match.lastgroup or "other"
        start, end = match.start(kind), match.end()
        if kind == "quote":
            literal_end = quoted_end(text, start)
            if literal_end is None:
                kind = "other"  # a quote that is never closed
            else:
                kind, end = "ident" if text[start] == "`" else "string", literal_end
        elif kind == "open":
            kind, end = "group", _group_end(text, start)
        out.append(Token(kind, text[start:end], end))
        index = end
    return out


def _group_end(text: str, start: int) -> int:
    try:
        return closing(text, start) + 1
    except ValueError:  # unclosed: the group runs to the end
        return len(text)
