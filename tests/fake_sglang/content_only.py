"""A model with no letter bias, for the fake or any backend stand-in: each label's log-probability depends
only on the state and on the option text shown beside that label, never on the letter or the position.

The state is a JSON object {option text: score}; a label beside option text t reads log softmax(score)[t]
(a log-probability, as a model's is: at most 0). Any other
state (the content-free `N/A`, a warm-up's) reads the same value for every label: flat. A question with
no options beside its labels (a noul, a score) reads flat too. What the stand-in reads is its prompt as
text: the first user turn is the state, the last one the question, whose `X: text` lines are its options.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from tests.fake_sglang.model import Logprobs

FLAT = -1.0
_TURN = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.DOTALL)
_OPTION = re.compile(r"^([A-Z]): (.*)$", re.MULTILINE)


def content_scores(state: str) -> dict[str, float] | None:
    """The state's log-probability per option text, or None for a state that carries none (content-free)."""
    try:
        scores = json.loads(state)
    except ValueError:
        return None
    if not isinstance(scores, dict) or not scores:
        return None
    top = max(scores.values())
    total = top + math.log(math.fsum(math.exp(value - top) for value in scores.values()))
    return {text: value - total for text, value in scores.items()}


def content_only_logprobs(tokenizer_dir: Path) -> Logprobs:
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))

    def logprobs(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
        turns = _TURN.findall(tokenizer.decode(list(input_ids), skip_special_tokens=False))
        scores = content_scores(turns[0]) if len(turns) > 1 else None
        if scores is None:
            return [FLAT] * len(token_ids)
        beside = dict(_OPTION.findall(turns[-1]))
        return [scores.get(beside.get(tokenizer.decode([token_id]), ""), FLAT) for token_id in token_ids]

    return logprobs
