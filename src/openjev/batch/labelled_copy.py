"""`openjev classify --out x.csv` (or `x.parquet`): a labelled copy of the input, written when the run ends.

One row per input row, in file order. The columns: every column of the input as the file has it (its
own names, in its order; for JSON rows every key a row has, in the order first met), then the answer
columns:
- `id`: the row's id (what `OUT.answers.jsonl` keys it by); left out where the file's own `id`
  column holds exactly these ids.
- `type`; `label` (the chosen option, yes/no, or the score level nearest the expected score) and
  `value` (the chosen option's probability, P(yes), or the expected score) for a labelled type;
  `probabilities` (each label's probability); `answer` (the whole answer as JSON text: all a box
  question has); `error` (the status and body of a row without an answer, as JSON text).
An answer column whose name the input already uses is `openjev_NAME` (a file made for `tasks fit`
keeps its gold `label` beside `openjev_label`), so no input column is ever replaced.

CSV, by the standard library's `csv` module: text and numbers as they are, null empty, anything else
(objects, arrays, true/false, `probabilities`) as JSON text. Parquet, by pyarrow: an input column as
pyarrow types it, as JSON text where its rows have no one type (a number here, text there) or a type
Parquet cannot store (an empty struct); `probabilities` a struct of float64, one field per label of
every question asked (in the order first met), null where the row's question has no such label.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openjev.batch.judging import prediction
from openjev.batch.rows import Row

ANSWER_COLUMNS = ("id", "type", "label", "value", "probabilities", "answer", "error")
#: The question types whose answer names one label (a box question's answer is boxes, in `answer` alone).
LABELLED = ("noul", "choice", "score")
PREFIX = "openjev_"


def input_columns(rows: list[Row]) -> list[str]:
    """The input's column names, in the file's order (first met, over every row)."""
    return list(dict.fromkeys(name for row in rows for name in row.source))


def answer_names(rows: list[Row], inputs: list[str]) -> dict[str, str]:
    """Each answer column's name in the copy (module doc): `id` dropped where the input's is the same."""
    own_ids = "id" in inputs and all(_text(row.source.get("id")) == row.id for row in rows)
    names, used = {}, set(inputs)
    for column in ANSWER_COLUMNS:
        if column == "id" and own_ids:
            continue
        name = column
        while name in used:
            name = PREFIX + name
        names[column] = name
        used.add(name)
    return names


def answer_of(row: Row, record: Mapping[str, Any]) -> dict[str, Any]:
    """The answer columns of one row, under their own names, `probabilities` a dict (label -> p)."""
    entry: dict[str, Any] = dict.fromkeys(ANSWER_COLUMNS)
    entry |= {"id": row.id, "type": row.question["type"]}
    if "answer" in record:
        answer = record["answer"]
        entry["answer"] = json.dumps(answer, ensure_ascii=False)
        if entry["type"] in LABELLED:
            label, distribution = prediction(entry["type"], answer)
            entry["label"], entry["probabilities"] = label, distribution
            entry["value"] = answer[entry["type"]] if entry["type"] in ("noul", "score") else distribution[label]
    elif "error" in record:
        entry["error"] = json.dumps(record["error"], ensure_ascii=False)
    return entry


def write_labelled_copy(out: Path, rows: list[Row], records: Mapping[str, Mapping[str, Any]]) -> None:
    """OUT as CSV or Parquet (module doc); nothing to do for JSONL, where the answers file is OUT."""
    suffix = out.suffix.lower()
    if suffix == ".jsonl":
        return
    inputs = input_columns(rows)
    names = answer_names(rows, inputs)
    answers = [answer_of(row, records.get(row.id, {})) for row in rows]
    columns = {name: [row.source.get(name) for row in rows] for name in inputs}
    columns |= {name: [entry[column] for entry in answers] for column, name in names.items()}
    if suffix == ".csv":
        _write_csv(out, columns)
    else:
        _write_parquet(out, columns, names["probabilities"])


def _write_csv(out: Path, columns: dict[str, list[Any]]) -> None:
    with out.open("w", encoding="utf-8", newline="") as sink:
        writer = csv.writer(sink)
        writer.writerow(columns)
        writer.writerows(zip(*([_cell(value) for value in values] for values in columns.values()), strict=True))


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    return json.dumps(value, ensure_ascii=False)


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _write_parquet(out: Path, columns: dict[str, list[Any]], probabilities: str) -> None:
    import pyarrow
    import pyarrow.parquet

    arrays = {
        name: _probabilities(values) if name == probabilities else _typed(values) for name, values in columns.items()
    }
    pyarrow.parquet.write_table(pyarrow.table(arrays), out)


def _probabilities(values: list[dict[str, float] | None]) -> Any:
    """A struct column, one float64 field per label met (module doc); all null where none has one."""
    import pyarrow

    labels = list(dict.fromkeys(label for value in values if value for label in value))
    if not labels:
        return pyarrow.nulls(len(values))
    return pyarrow.array(values, type=pyarrow.struct([(label, pyarrow.float64()) for label in labels]))


def _typed(values: list[Any]) -> Any:
    """The column as pyarrow types it, else as JSON text (text as it is) where it has no one type."""
    import pyarrow

    try:
        array = pyarrow.array(values)
    except (pyarrow.ArrowException, OverflowError):
        array = None
    if array is not None and _storable(array.type):
        return array
    as_text = [
        value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False) for value in values
    ]
    return pyarrow.array(as_text, type=pyarrow.string())


def _storable(kind: Any) -> bool:
    """Whether Parquet can store the type: no struct without fields, at any depth."""
    import pyarrow

    if pyarrow.types.is_struct(kind):
        return kind.num_fields > 0 and all(_storable(kind.field(i).type) for i in range(kind.num_fields))
    if pyarrow.types.is_list(kind) or pyarrow.types.is_large_list(kind):
        return _storable(kind.value_type)
    return True
