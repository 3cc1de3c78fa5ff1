"""A user's labelled file as rows: one state, one question and (for `eval`) the gold answer each.

Contract:
- JSONL: one object a line, `{"state": ..., "question": {...}, "gold": ..., "id": ..., "pair": ...}`;
  CSV: a header with `state` and `gold` (and `id`, `pair`, `question`: a question as a JSON object)
  and one row a line; both read by `request/labelled_files.py`. `label` is taken where `gold` is absent,
  so a file made for `openjev tasks fit` evaluates as it is. `--question FILE` gives the one question
  every row without its own is asked.
- `id` defaults to the row's line number, so a resumed run finds the same rows under the same ids; ids
  must be unique. `pair` groups the two halves of a contrastive pair.
- Gold is read for the question's type: a choice's option name; a noul's yes or no (`true`/`false`,
  `1`/`0` too); a score's level index or the level's own text. Anything else is a `LabelledFileError` naming the
  file, the line and the field, before a single request is sent: nothing is half-done.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from openjev.request.labelled_files import LabelledFileError, read_records
from openjev.request.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, Question
from openjev.tasks.schema import label_index, label_names

QUESTION: TypeAdapter[Question] = TypeAdapter(Question)


@dataclass(frozen=True)
class Row:
    id: str
    state: Any
    question: dict[str, Any]
    gold: str | None
    pair: str | None


def read_rows(path: Path, *, question: Mapping[str, Any] | None = None, need_gold: bool) -> list[Row]:
    """Every row of `path` checked; LabelledFileError on the first problem (an empty file is one)."""
    rows, seen = [], set()
    for line, record in read_records(path):
        row = _row(record, line, question, need_gold, where=f"{path}:{line}")
        if row.id in seen:
            raise LabelledFileError(f"{path}:{line}: id {row.id!r} is used twice")
        seen.add(row.id)
        rows.append(row)
    return rows


def read_question(path: Path) -> dict[str, Any]:
    """The question a `--question` file holds (one JSON object), checked as a Jev question."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise LabelledFileError(f"{path}: not a JSON question: {error}") from None
    return _checked_question(value, where=str(path))


def gold_label(question: Mapping[str, Any], gold: Any, *, where: str) -> str:
    """The gold answer as the answer's own key: option name, "yes"/"no", or the level index as text;
    spelled as `POST /v1/tasks` takes a label (`tasks/schema.label_index`)."""
    parsed = QUESTION.validate_python(question)
    if isinstance(parsed, BoxQuestion):
        raise LabelledFileError(f"{where}: a box question has no gold answer eval can check")
    index = label_index(parsed, gold if isinstance(gold, bool | str) else str(gold))
    if index is None:
        raise LabelledFileError(f"{where}: gold {gold!r} {_expected(parsed)}")
    if isinstance(parsed, NoulQuestion):
        return ("yes", "no")[index]
    return label_names(parsed)[index]


def _expected(question: Question) -> str:
    if isinstance(question, NoulQuestion):
        return "is not yes or no (noul question)"
    if isinstance(question, ChoiceQuestion):
        return f"is not one of the question's options ({', '.join(question.criteria)})"
    return f"is neither a level index 0-{len(question.criteria) - 1} nor a level's text"


def _row(record: Any, line: int, default: Mapping[str, Any] | None, need_gold: bool, where: str) -> Row:
    if not isinstance(record, dict):
        raise LabelledFileError(f"{where}: a row must be an object")
    if "state" not in record or record["state"] in (None, ""):
        raise LabelledFileError(f"{where}: state is missing")
    asked = record.get("question") or default
    if asked is None:
        raise LabelledFileError(f"{where}: question is missing (give one per row, or --question FILE)")
    question = _checked_question(asked, where=f"{where}: question")
    gold = record.get("gold", record.get("label"))
    if gold in (None, "") and need_gold:
        raise LabelledFileError(f"{where}: gold is missing")
    label = None if gold in (None, "") else gold_label(question, gold, where=f"{where}: gold")
    pair = record.get("pair")
    return Row(
        str(record.get("id") or line), record["state"], question, label, None if pair in (None, "") else str(pair)
    )


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
