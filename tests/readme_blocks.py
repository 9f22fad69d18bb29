"""The README's code blocks that tests run or compare verbatim, found by the HTML comment before
each (``<!-- first-run:dag -->``): what a user copies is what the tests check."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(marker: str) -> str:
    """The fenced code block that follows ``<!-- marker -->`` in the README, without its fences."""
    text = README.read_text()
    _, found, rest = text.partition(f"<!-- {marker} -->\n")
    assert found, f"README.md has no <!-- {marker} --> block"
    match = re.match(r"```[\w-]*\n(.*?)^```$", rest, re.DOTALL | re.MULTILINE)
    assert match, f"README.md: <!-- {marker} --> is not followed by a fenced code block"
    return match.group(1)
