"""The fake's hidden states, as SGLang 0.5.19 answers `return_hidden_states` (`backends/sglang_hidden.py`).

A request may ask only if the server was launched with a mode that allows it (`mode`: "last", "full"
or None), else it is refused with 0.5.19's 400 and words; `true` (every position) needs "full". The
state itself is deterministic and carries the prompt's content, so that a head fitted on it can learn:
a bag of the prompt's ids hashed into `WIDTH` buckets, scaled to unit length (the last position's
state of a causal model depends on the whole prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tests.fake_sglang.rules import Outcome

WIDTH = 64
#: Knuth's multiplicative hash: neighbouring ids fall into unrelated buckets.
_MULTIPLIER = 2_654_435_761

NOT_CONFIGURED = (
    "The server is not configured to return hidden states. Please set `--return-hidden-states-mode last`, "
    "`--return-hidden-states-mode full`, or the legacy `--enable-return-hidden-states` flag."
)
BAD_VALUE = "return_hidden_states must be a boolean or the string literal 'last'."


def server_args(mode: str | None) -> dict[str, Any]:
    """What the Python frontend's `/server_info` lists of the launch's hidden-state flags."""
    return {"return_hidden_states_mode": mode, "enable_return_hidden_states": False}


def refusal(item: dict[str, Any], mode: str | None) -> Outcome | None:
    """0.5.19's answer to one request's `return_hidden_states` on a server launched with `mode`."""
    asked = item.get("return_hidden_states", False)
    if asked is not True and asked is not False and asked != "last":
        return Outcome(BAD_VALUE)
    if asked is False:
        return None
    if mode is None:
        return Outcome(NOT_CONFIGURED)
    if asked is True and mode != "full":
        return Outcome(
            "The requested return_hidden_states mode exceeds the server maximum `last`. "
            "Please launch with `--return-hidden-states-mode full` to allow return_hidden_states=True."
        )
    return None


def judge_call(body: dict[str, Any], items: list[dict[str, Any]], mode: str | None) -> Outcome | None:
    """0.5.19's answer to one call's `return_hidden_states`; a list-form value (one entry per request, a
    list of another length refused; a scalar is every request's) is first spread over `items`."""
    asked = body.get("return_hidden_states", False)
    if isinstance(asked, list):
        if len(asked) != len(items) or (len(items) == 1 and items[0] is body):
            return Outcome("The length of return_hidden_states should be equal to the batch size.")
        for item, value in zip(items, asked, strict=True):
            item["return_hidden_states"] = value
    return next((found for found in (refusal(item, mode) for item in items) if found is not None), None)


def add_state(answer: dict[str, Any], item: dict[str, Any], prompt: Sequence[Any]) -> dict[str, Any]:
    """`answer` with `meta_info.hidden_states` where the request asked: in "last" mode one flat list."""
    if item.get("return_hidden_states") == "last":
        answer["meta_info"]["hidden_states"] = hidden_state(prompt)
    return answer


def hidden_state(prompt: Sequence[Any]) -> list[float]:
    """The state at the prompt's last position (`prompt`: ids, and images as the model sees them)."""
    ids = np.asarray([hash(token) if not isinstance(token, int) else token for token in prompt], dtype=np.uint64)
    buckets = (ids * np.uint64(_MULTIPLIER)) % np.uint64(WIDTH)
    counts = np.bincount(buckets.astype(np.int64), minlength=WIDTH).astype(np.float64)
    return (counts / np.linalg.norm(counts)).round(6).tolist()
