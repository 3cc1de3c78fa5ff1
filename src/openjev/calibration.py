"""Calibration temperatures per question type and option count, read from a small JSON file.

`evals/calibrate.py` fits the file on dev data; `OPENJEV_CALIBRATION_FILE` names it; the engine
applies it in the answer step. A temperature T turns the readout's distribution p into

    p_T(o) = p(o)^(1/T) / sum_o' p(o')^(1/T),

so T > 1 flattens an over-confident model and T < 1 sharpens an under-confident one. The argmax
never changes, so a choice keeps its option (its probabilities and confidence move); but a noul's
answer is P(yes) and a score's the expected level sum_i i p_T(i), and both move with T: towards 0.5
and the middle level as T grows, towards the likelier side as it shrinks. That is intended: the
calibrated distribution is the better estimate, and its expectation the better level. Where the
file has no entry for a question's type and bucket, OPENJEV_TEMPERATURE applies as before.

The file (`FORMAT`):

    {"format": "openjev-calibration/1",
     "temperatures": {"choice": {"3-4": 1.31, "5-10": 1.12}, "noul": {"2": 0.9}},
     ...anything else (how it was fitted) is kept but not read}

Types are `noul`, `choice` and `score`; buckets are the option (or level) counts of `BUCKETS`.
Anything else is refused at start-up with the reason and the file's path.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "openjev-calibration/1"
QUESTION_TYPES = ("noul", "choice", "score")
#: Option-count buckets (inclusive bounds), named "low-high" or "n" when low == high.
BUCKETS: tuple[tuple[int, int], ...] = ((2, 2), (3, 4), (5, 10), (11, 255))
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0


class CalibrationError(ValueError):
    """The calibration file cannot be used."""


def bucket_name(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


BUCKET_NAMES = tuple(bucket_name(low, high) for low, high in BUCKETS)


def bucket_of(option_count: int) -> str:
    for low, high in BUCKETS:
        if low <= option_count <= high:
            return bucket_name(low, high)
    raise ValueError(f"no calibration bucket holds {option_count} options")


@dataclass(frozen=True, slots=True)
class Calibration:
    source: str
    temperatures: dict[str, dict[str, float]]

    def temperature(self, question_type: str, option_count: int) -> float | None:
        """The fitted temperature for this type and option count, or None when the file has none."""
        return self.temperatures.get(question_type, {}).get(bucket_of(option_count))


def parse_calibration(document: Any, source: str) -> Calibration:
    """Check a parsed calibration document; CalibrationError names what is wrong."""

    def refuse(reason: str) -> CalibrationError:
        return CalibrationError(f"calibration file {source}: {reason}")

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise refuse(f'expected a JSON object with "format": "{FORMAT}"')
    table = document.get("temperatures")
    if not isinstance(table, dict):
        raise refuse('"temperatures" must be an object of question types')
    temperatures: dict[str, dict[str, float]] = {}
    for question_type, buckets in table.items():
        if question_type not in QUESTION_TYPES:
            raise refuse(f"unknown question type {question_type!r}; expected one of {', '.join(QUESTION_TYPES)}")
        if not isinstance(buckets, dict):
            raise refuse(f'"temperatures.{question_type}" must be an object of option-count buckets')
        for bucket, value in buckets.items():
            if bucket not in BUCKET_NAMES:
                raise refuse(
                    f"unknown bucket {bucket!r} for {question_type}; expected one of {', '.join(BUCKET_NAMES)}"
                )
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not MIN_TEMPERATURE <= value <= MAX_TEMPERATURE
            ):
                raise refuse(
                    f"temperature {question_type}/{bucket} must be a number in "
                    f"[{MIN_TEMPERATURE}, {MAX_TEMPERATURE}], got {value!r}"
                )
            temperatures.setdefault(question_type, {})[bucket] = float(value)
    return Calibration(source, temperatures)


def load_calibration(path: Path) -> Calibration:
    try:
        document = json.loads(Path(path).read_text())
    except OSError as error:
        raise CalibrationError(f"calibration file {path} cannot be read: {error.strerror or error}") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CalibrationError(f"calibration file {path} is not valid JSON: {error}") from error
    return parse_calibration(document, str(path))
