"""A user's labelled file as rows: one state, one question and (for `eval`) the gold answer each.

Contract:
- Any file `request/labelled_files.py` reads (JSONL, JSON, CSV, TSV, Parquet, gzipped or not):
  `{"state": ..., "question": {...}, "gold": ..., "id": ..., "pair": ...}` a row (`question` in a CSV
  as a JSON object). `label` is taken where `gold` is absent, so a file made for `openjev tasks fit`
  evaluates as it is. `--question FILE` gives the one question every row without its own is asked;
  `columns` maps these names to the file's own.
- A row without an `id` is named by the digest of its state and question (`#2`, `#3` after it for a
  repeat), never by its line, so a row inserted above the others does not move their answers onto
  its neighbours on a resume; ids must be unique. `pair` groups the two halves of a contrastive pair.
  `digest` names what the row asks (state and question): an answer kept for another is asked again.
- Gold is read for the question's type (`tasks/schema.label_index`): a choice's option name; a noul's
  yes or no (`true`/`false`, `1`/`0` too); a score's level by `score_gold`: `auto` its index (from 0)
  or the level's own text, `index`, `text`, or `rating` (1 = the first level). Names match up to case
  and surrounding spaces. Without `need_gold` (`classify`) gold is not read at all. Every problem of
  the file is one `LabelledFileError` listing each with its line, before a single request is sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from openjev.request.labelled_files import LabelledFileError, Problems, read_file_records, renamed
from openjev.request.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, Question, ScoreQuestion
from openjev.tasks.schema import label_index, label_names

QUESTION: TypeAdapter[Question] = TypeAdapter(Question)
SCORE_GOLD = ("auto", "index", "text", "rating")


@dataclass(frozen=True)
class Row:
    id: str
    state: Any
    question: dict[str, Any]
    gold: str | None
    pair: str | None
    line: int = 0
    #: sha256 (16 hex) of the state and question: what an answer kept for this row must have been asked.
    digest: str = ""
    #: The row as the file has it, under the file's own column names (what classify's --out copies).
    source: Mapping[str, Any] = field(default_factory=dict, compare=False)


def digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Missing(LabelledFileError):
    """A row without a value the command needs: `kind` names it."""

    def __init__(self, kind: str, hint: str) -> None:
        super().__init__(f"{kind} is missing{hint}")
        self.kind = kind


#: What a file where no row has the value is told, once, in place of a line per row.
NONE_HAS = {
    "state": "no row has a state (name the file's own column with --state-column)",
    "question": "no row has a question: give one per row (a question column) or --question FILE",
    "gold": "no row has a gold answer (no gold or label column; name the file's own with --label-column)",
}


def read_rows(
    path: Path,
    *,
    question: Mapping[str, Any] | None = None,
    need_gold: bool,
    columns: Mapping[str, str] | None = None,
    score_gold: str = "auto",
    label_names: list[str] | None = None,
) -> list[Row]:
    """Every row of `path` checked; one LabelledFileError listing every problem (an empty file is one).
    A value no row has is one problem, not one a row; `label_names` name integer gold (0 the first)."""
    rows, seen, repeats, problems = [], set(), {}, Problems(path)
    records = read_file_records(path, columns, problems)
    missing: dict[str, list[tuple[int, str]]] = {}
    for line, source in records:
        record = renamed(source, columns or {})
        try:
            row = replace(_row(_named_gold(record, label_names), line, question, need_gold, score_gold), source=source)
        except Missing as error:
            missing.setdefault(error.kind, []).append((line, str(error)))
            continue
        except LabelledFileError as error:
            problems.add(line, str(error))
            continue
        if record.get("id") in (None, ""):
            repeats[row.id] = repeats.get(row.id, 0) + 1
            row = replace(row, id=f"{row.id}#{repeats[row.id]}") if repeats[row.id] > 1 else row
        if row.id in seen:
            problems.add(line, f"id {row.id!r} is used twice")
        seen.add(row.id)
        rows.append(row)
    for kind, lines in missing.items():
        if len(lines) == len(records):
            problems.add(None, NONE_HAS[kind])
        else:
            for line, message in lines:
                problems.add(line, message)
    problems.raise_any()
    return rows


def _named_gold(record: dict[str, Any], names: list[str] | None) -> dict[str, Any]:
    """`record` with an integer gold (or label) replaced by its name in `names`, 0 the first."""
    if not names:
        return record
    key = "gold" if record.get("gold") not in (None, "") else "label"
    value = record.get(key)
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdecimal())):
        return record
    if int(value) >= len(names):
        raise LabelledFileError(f"gold {value!r} has no name: --label-names lists {len(names)} (0 the first)")
    return {**record, key: names[int(value)]}


def read_question(path: Path) -> dict[str, Any]:
    """The question a `--question` file holds (one JSON object), checked as a Jev question."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise LabelledFileError(f"{path}: not a JSON question: {error}") from None
    return _checked_question(value, where=str(path))


def gold_label(question: Mapping[str, Any], gold: Any, *, where: str = "", score_gold: str = "auto") -> str:
    """The gold answer as the answer's own key: option name, "yes"/"no", or the level index as text;
    read as `POST /v1/tasks` reads a label (`tasks/schema.label_index`), a score's by `score_gold`."""
    parsed = QUESTION.validate_python(question)
    prefix = f"{where}: " if where else ""
    if isinstance(parsed, BoxQuestion):
        raise LabelledFileError(f"{prefix}a box question has no gold answer eval can check")
    text = gold if isinstance(gold, bool | str) else str(gold)
    if isinstance(parsed, ScoreQuestion):
        text = _score_gold(text, score_gold, len(parsed.criteria))
    index = None if text is None else label_index(parsed, text)
    if index is None:
        raise LabelledFileError(f"{prefix}gold {gold!r} {_expected(parsed, score_gold)}")
    if isinstance(parsed, NoulQuestion):
        return ("yes", "no")[index]
    return label_names(parsed)[index]


def _score_gold(gold: str | bool, how: str, levels: int) -> str | None:
    """The gold as `label_index` takes it: `rating` moved to an index, `index`/`text` the one spelling."""
    if isinstance(gold, bool):
        return None
    number = gold.strip().isdecimal()
    if how == "rating":
        return str(int(gold) - 1) if number and 1 <= int(gold) <= levels else None
    if (how == "index" and not number) or (how == "text" and number):
        return None
    return gold


def _expected(question: Question, score_gold: str) -> str:
    if isinstance(question, NoulQuestion):
        return "is not yes or no (noul question)"
    if isinstance(question, ChoiceQuestion):
        return f"is not one of the question's options ({', '.join(question.criteria)})"
    last = len(question.criteria) - 1
    return {
        "rating": f"is not a rating 1-{last + 1} (--score-gold rating: 1 is the first level)",
        "index": f"is not a level index 0-{last} (levels count from 0; 1-based ratings: --score-gold rating)",
        "text": "is not a level's text (--score-gold text)",
    }.get(
        score_gold,
        f"is neither a level index 0-{last} (levels count from 0; 1-based ratings: --score-gold rating) "
        "nor a level's text",
    )


def _row(record: dict[str, Any], line: int, default: Mapping[str, Any] | None, need_gold: bool, how: str) -> Row:
    if "state" not in record or record["state"] in (None, ""):
        raise Missing("state", "")
    asked = record.get("question") or default
    if asked is None:
        raise Missing("question", " (give one per row, or --question FILE)")
    question = _checked_question(asked, where="question")
    label = None
    if need_gold:
        gold = record.get("gold", record.get("label"))
        if gold in (None, ""):
            raise Missing("gold", "")
        label = gold_label(question, gold, score_gold=how)
    pair = record.get("pair")
    digest = digest_of({"state": record["state"], "question": question})
    given = record.get("id")
    row_id = digest[:12] if given in (None, "") else str(given)
    return Row(row_id, record["state"], question, label, None if pair in (None, "") else str(pair), line, digest)


def _checked_question(value: Any, *, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise LabelledFileError(f"{where}: not a JSON object") from None
    try:
        parsed = QUESTION.validate_python(value)
    except ValidationError as error:
        issue = error.errors()[0]
        field = ".".join(map(str, issue["loc"])) or "question"
        raise LabelledFileError(f"{where}: not a Jev question: {field}: {issue['msg']}") from None
    return {**value, "type": parsed.type}
