"""The settings that change an answer: what `/v1/limits` shows and an evaluation run records.

Two servers on the same backend give the same answers to the same request exactly when these agree;
`evals/run.py` refuses to resume a run against a server whose settings differ.
"""

from __future__ import annotations

import hashlib

from openjev.config import Settings
from openjev.options import QUESTION_TYPES

#: Settings added after tasks and runs were first stamped with their answer settings, each with the value
#: every server before it answered with: a stamp made before one was added is read with that value
#: (`as_stamped_now`), so a task fitted then still serves, unchanged, where the setting keeps that value.
ADDED_SETTINGS: dict[str, object] = {"option_order": "given"}


def as_stamped_now(stamped: dict[str, object]) -> dict[str, object]:
    """A stamp of answer settings with the settings added since it was made (`ADDED_SETTINGS`)."""
    return {**ADDED_SETTINGS, **stamped}


def answer_settings(settings: Settings) -> dict[str, object]:
    """Every setting that changes an answer for the same request and backend, as `/v1/limits` shows it
    and `evals/run.py` records it (a run resumed against other ones is refused). A new setting that
    changes answers gets one line here. The calibration file counts by its content (sha256)."""
    calibration = settings.calibration_file
    return {
        "answer_cue": settings.answer_cue.value,
        **{f"answer_cue_{kind}": settings.answer_cue_of(kind).value for kind in QUESTION_TYPES},
        "score_labels": settings.score_labels.value,
        "worked_examples": settings.worked_examples.value,
        "score_reverse": settings.score_reverse,
        "contextual_calibration": settings.contextual_calibration,
        # The thinking tier's (they change only the answers of requests naming OPENJEV_THINK_MODEL).
        "think_margin": settings.think_margin,
        "think_max_share": settings.think_max_share,
        "think_window": settings.think_window,
        "think_budget_tokens": settings.think_budget_tokens,
        "option_shifts": settings.option_shifts,
        "rotation_average": settings.rotation_average.value,
        "rotation_skip_above": settings.rotation_skip_above,
        "option_keys": settings.option_keys,
        "option_order": settings.option_order.value,
        "temperature": settings.temperature,
        "score_temperature": settings.score_temperature,
        "confidence": settings.confidence.value,
        "calibration_sha256": hashlib.sha256(calibration.read_bytes()).hexdigest() if calibration else None,
    }
