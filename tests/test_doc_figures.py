"""Figures the docs quote next to the constant they come from: each sentence is found in its page and
its number read back against the code, so a changed constant fails here until the page says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openjev.api import errors, parsing, server
from openjev.config import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"
HEAD = (server.MAX_HEAD_BYTES // 1024, server.MAX_HEAD_LINES)
LISTED = (errors.MAX_LISTED_ISSUES, errors.LISTED_BYTES // 1024)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def quoted(page: str, pattern: str) -> tuple[int, ...]:
    """The numbers `pattern`'s groups capture in `page` (whitespace in the pattern matches line breaks)."""
    text = (DOCS / page).read_text()
    found = re.search(pattern.replace(" ", r"\s+"), text)
    assert found, f"{page} no longer says {pattern!r}"
    return tuple(number(group) for group in found.groups())


@pytest.mark.parametrize(
    ("page", "pattern", "values"),
    [
        ("api.md", r"counted in C before parsing, (\d+) KiB at a time", (parsing.COUNT_PIECE // 1024,)),
        ("api.md", r"at most ([\d,]+) JSON values in a body", (parsing.MAX_JSON_VALUES,)),
        ("api.md", r"([\d,]+) questions, ([\d,]+) `input` items", (parsing.MAX_QUESTIONS, parsing.MAX_INPUT_ITEMS)),
        ("api.md", r"`/v1/decisions`, ([\d,]+) entries in any list", (parsing.MAX_ITEMS,)),
        ("api.md", r"and ([\d,]+) values in all the questions", (parsing.MAX_QUESTION_VALUES,)),
        ("api.md", r"over (\d+) KiB or (\d+) lines \(`api/server.py`", HEAD),
        ("api.md", r"A request head over (\d+) KiB or (\d+) lines", HEAD),
        ("api.md", r"lists the first (\d+) issues, within (\d+) KiB of serialized", LISTED),
        ("api.md", r"clipped to (\d+) bytes of JSON", (errors.ENTRY_BYTES,)),
        ("api.md", r"a location to (\d+) parts", (errors.MAX_LOC_PARTS,)),
        ("api.md", r"message is clipped to (\d+) KiB", (errors.MESSAGE_BYTES // 1024,)),
        ("api.md", r"past ([\d,]+) issues only their", (parsing.MAX_ENUMERATED_ISSUES,)),
    ],
)
def test_a_quoted_figure_is_its_constant(page: str, pattern: str, values: tuple[int, ...]) -> None:
    assert quoted(page, pattern) == values


def test_an_error_body_bound_leaves_room_under_the_64_kib_the_docs_promise() -> None:
    """The entries' bytes, the first entry (always listed, at most a location of MAX_LOC_PARTS clipped
    keys and a message) and the `too_many_errors` entry fit 64 KiB."""
    first = (errors.MAX_LOC_PARTS + 2) * errors.ENTRY_BYTES
    assert errors.LISTED_BYTES + first + 512 <= 64 * 1024
    assert "No error body passes 64 KiB in bytes" in " ".join((DOCS / "api.md").read_text().split())


def test_no_page_says_a_score_question_is_read_twice_without_its_setting() -> None:
    """The reverse view of a score question is off by default (`OPENJEV_SCORE_REVERSE`)."""
    assert Settings().score_reverse is False
    for page in sorted(DOCS.glob("*.md")):
        text = " ".join(page.read_text().split())
        for found in re.finditer(r"score question (is )?(read|asked) (in two views|twice)", text):
            around = text[max(0, found.start() - 200) : found.end() + 200]
            assert "OPENJEV_SCORE_REVERSE" in around, (page.name, around)
