"""A model with no letter bias that knows something about each question, for the fake or any backend
stand-in: each label's log-probability depends only on the state, the question and the text shown beside
that label, never on the letter or the position.

What the stand-in reads is its prompt as text: the first user turn is the state, the last one the question,
whose first line is its head (the instructions) and whose `X: text` lines are its options (choice) or levels
(score); a label with no such line (a noul's Yes and No) stands for its own text. The state is a JSON object
{text: content score}. A label beside text t reads

    logit(t) = content(t) + knowledge(head, t),    logprob(t) = log softmax over the read labels of logit,

where content(t) is the state's score for t (0 for every t over a state that is not such an object: the
content-free `N/A`; MISSING for a text the state does not score) and knowledge(head, t), in
[-KNOWLEDGE, KNOWLEDGE], is a fixed pseudo-random function of the question's head and the text alone: what
the model knows about the question whatever the state says. The `N/A` readout is therefore an honest answer
to the question (knowledge alone), not a label prior: dividing it out removes knowledge, not bias. The
answer of one uncorrected readout is argmax(content + knowledge) (`best_text`), and it does not depend on
the order the texts are shown in. A readout with fewer than two user turns (a warm-up's) reads FLAT.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from tokenizers import Tokenizer

from tests.fake_sglang.model import Logprobs

FLAT = -1.0
#: The bound of the knowledge term (nats): as large as the content scores the property tests draw.
KNOWLEDGE = 3.0
#: The content score of a text the state does not score.
MISSING = -20.0
_TURN = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.DOTALL)
_OPTION = re.compile(r"^([A-Z]|[1-9]): (.*)$", re.MULTILINE)


def knowledge(head: str, text: str) -> float:
    """What the model knows of option or level `text` under a question whose head is `head`: a fixed value
    in [-KNOWLEDGE, KNOWLEDGE] (a 64-bit digest of both, scaled)."""
    digest = hashlib.blake2b(f"{head}\x00{text}".encode(), digest_size=8).digest()
    return KNOWLEDGE * (2.0 * int.from_bytes(digest, "little") / 2.0**64 - 1.0)


def content_scores(state: str) -> dict[str, float]:
    """The state's content score per text; {} for a state that carries none (content-free)."""
    try:
        scores = json.loads(state)
    except ValueError:
        return {}
    return scores if isinstance(scores, dict) and all(isinstance(v, int | float) for v in scores.values()) else {}


def logits(head: str, texts: Sequence[str], scores: Mapping[str, float]) -> list[float]:
    """Each text's content plus knowledge (module doc); content 0 everywhere over a content-free state."""
    return [(scores.get(text, MISSING) if scores else 0.0) + knowledge(head, text) for text in texts]


def log_softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    total = top + math.log(math.fsum(math.exp(value - top) for value in values))
    return [value - total for value in values]


def readout_distribution(head: str, scores: Mapping[str, float], texts: Sequence[str]) -> dict[str, float]:
    """What one uncorrected readout of the question reads, by text (temperature 1)."""
    return dict(zip(texts, (math.exp(value) for value in log_softmax(logits(head, texts, scores))), strict=True))


def best_text(head: str, scores: Mapping[str, float]) -> str:
    """The answer of one uncorrected readout over a state giving `scores`: the content's best, knowledge
    included."""
    texts = list(scores)
    values = logits(head, texts, scores)
    return texts[values.index(max(values))]


def knowing_logprobs(tokenizer_dir: Path) -> Logprobs:
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))

    def logprobs(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
        turns = _TURN.findall(tokenizer.decode(list(input_ids), skip_special_tokens=False))
        if len(turns) < 2:
            return [FLAT] * len(token_ids)
        question = turns[-1]
        beside = dict(_OPTION.findall(question))
        labels = [tokenizer.decode([token_id]).strip() for token_id in token_ids]
        texts = [beside.get(label, label) for label in labels]
        return log_softmax(logits(question.split("\n", 1)[0], texts, content_scores(turns[0])))

    return logprobs
