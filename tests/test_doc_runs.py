"""Runs the docs quote as the default's are the default's: a committed run (`evals/runs/...`) or a
report header (`- answer settings: {...}`) that a sentence of the docs calls the default's has the
answer settings the default has now (`answer_settings(Settings())`), unless that sentence dates it
("of that day", "predates"). A run folder named `default` is quoted so too."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from openjev.answering.answer_settings import answer_settings
from openjev.config import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "evals" / "README.md"]
RUN = re.compile(r"`?(evals/runs/[\w.@/-]+?)/?`")
HEADER = re.compile(r"- answer settings: (\{.*\})")
#: Words that call what follows the default's settings ("the embedded default model" names a model only).
DEFAULT_CLAIM = re.compile(
    r"\b(?:the (?:embedded )?default's|on the (?:embedded )?default(?! model)|today's default)\b"
)
DATED = re.compile(r"of that day|predates")
#: Settings removed since a run: the value they had when off (a run with them off reads as today's).
REMOVED_OFF = {"label_prior": False}


def differences(recorded: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each recorded answer setting that differs from today's default: (recorded, today's)."""
    today = answer_settings(Settings())
    return {
        key: (value, today.get(key, REMOVED_OFF.get(key)))
        for key, value in recorded.items()
        if value != today.get(key, REMOVED_OFF.get(key, object()))
    }


def run_settings(path: str) -> dict[str, Any]:
    return json.loads((ROOT / path / "run.json").read_text())["answer_settings"]


def claims(docs: list[Path] = DOCS) -> list[tuple[str, str, dict[str, Any]]]:
    """(doc, what is quoted, its answer settings) for each run or report header a doc calls the default's;
    a quoted report (indented or fenced) is what the prose paragraph before it says it is."""
    found = []
    for doc in docs:
        introduced = False
        for paragraph in re.split(r"\n\s*\n", doc.read_text()):
            text = " ".join(paragraph.split())
            claimed = bool(DEFAULT_CLAIM.search(text)) and not DATED.search(text)
            if not paragraph.startswith(("    ", "```")):
                introduced = claimed
            for path in RUN.findall(text):
                if (ROOT / path / "run.json").is_file() and (claimed or path.endswith("/default")):
                    if path.endswith("/default") and DATED.search(text):
                        continue
                    found.append((doc.name, path, run_settings(path)))
            if claimed or introduced:
                found += [(doc.name, "answer settings", json.loads(header)) for header in HEADER.findall(paragraph)]
    return found


def test_every_run_quoted_as_the_default_s_has_today_s_default_settings() -> None:
    wrong = [(doc, what, diff) for doc, what, recorded in claims() if (diff := differences(recorded))]
    assert wrong == []


def test_the_check_sees_a_run_off_today_s_default() -> None:
    # Read with scores divided by a content-free prior, which today's default no longer does.
    assert differences(run_settings("evals/runs/decisions-examples-dev-2026-12-04/qwen15-block")) == {
        "contextual_calibration": ("score", "")
    }
    assert differences({"option_shifts": 2, "label_prior": True}) == {
        "option_shifts": (2, 1),
        "label_prior": (True, False),
    }


def test_the_finder_finds_a_claim_and_skips_a_dated_one(tmp_path: Path) -> None:
    # No doc calls a run the default's today, so the check above reads nothing: its finder is checked here.
    doc = tmp_path / "doc.md"
    off = "evals/runs/decisions-examples-dev-2026-12-04/qwen15-block"
    doc.write_text(
        f"Measured on the embedded default: `{off}`.\n\n"
        f"Measured on the embedded default of that day: `{off}`.\n\n"
        "Read on the embedded default:\n\n"
        '    - answer settings: {"option_shifts": 2}\n'
    )
    found = claims([doc])
    assert found == [("doc.md", off, run_settings(off)), ("doc.md", "answer settings", {"option_shifts": 2})]
    assert [differences(recorded) for _, _, recorded in found] == [
        {"contextual_calibration": ("score", "")},
        {"option_shifts": (2, 1)},
    ]
