"""The defaults are sound for every question type: on a model with no letter bias that knows something about
each question (`tests/fake_sglang/knowing.py`: its `N/A` readout is knowledge, not a label prior) the served
answer is one uncorrected readout's, the content's best, whatever order the options or levels come in, under
the default settings and every sound variant a setting selects. Each property is checked against what the
stand-in was given (its content scores and its knowledge), never against the code that combines readouts.
Dividing by the content-free readout (OPENJEV_CONTEXTUAL_CALIBRATION) removes the knowledge too: it is a
setting, off by default, and a test here shows what it serves instead."""

from __future__ import annotations

import asyncio
import json
import math
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.backends.base import Backend, BackendError, LabelLogprobs, ReadoutCall
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest
from tests.fake_sglang.knowing import best_text, knowing_logprobs, logits, readout_distribution

#: The default, then each sound variant a setting selects (docs/settings.md).
VARIANTS = {
    "default": {},
    "two rotations, gated": {"option_shifts": 2},
    "log average": {"option_shifts": 2, "rotation_average": "log"},
    "every rotation read": {"option_shifts": 2, "rotation_skip_above": 1.0},
    "never a second rotation": {"option_shifts": 2, "rotation_skip_above": 0.0},
    "four rotations, log": {"option_shifts": 4, "rotation_average": "log", "rotation_skip_above": 1.0},
    "score reversed": {"score_reverse": True},
    "canonical order": {"option_order": "canonical"},
    "canonical, four rotations": {"option_order": "canonical", "option_shifts": 4, "rotation_skip_above": 1.0},
}
TYPES = ("choice", "score", "noul")


class KnowingModel(Backend):
    """The knowing stand-in as a backend; counts its question readouts (not the warm-ups, which read one id)."""

    def __init__(self, chat: ChatTokenizer) -> None:
        self.logprobs = knowing_logprobs(chat.directory)
        self.reads = 0

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        if len(call.label_token_ids) > 1:
            self.reads += 1
        return LabelLogprobs(tuple(self.logprobs(call.input_ids, call.label_token_ids)), len(call.input_ids), None)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir) -> ChatTokenizer:
    return ChatTokenizer(qwen_tokenizer_dir)


@pytest.fixture(scope="module")
def engines(chat) -> dict[str, Engine]:
    return {name: Engine(Settings(**values), chat, KnowingModel(chat)) for name, values in VARIANTS.items()}


def systemone_question(kind: str, head: str, order: list[str]) -> dict:
    """The question of `kind` under instructions `head`, its options or levels in `order` (a noul reads its
    own Yes and No)."""
    if kind == "choice":
        return {"type": "choice", "instructions": head, "criteria": {text: None for text in order}}
    if kind == "score":
        return {"type": "score", "instructions": head, "criteria": order}
    return {"type": "noul", "instructions": head}


def served(engine: Engine, kind: str, head: str, scores: dict[str, float], order: list[str]) -> dict:
    body = {
        "model": "jev-latest",
        "state": json.dumps(scores),
        "questions": {"q": systemone_question(kind, head, order)},
    }
    evaluation = asyncio.run(engine.evaluate(engine.prepare(SystemOneRequest.model_validate(body))))
    return evaluation.answers["q"]


@st.composite
def questions(draw: st.DrawFn, kind: str) -> tuple[str, dict[str, float], list[str]]:
    """A head, content scores whose best with the stand-in's knowledge is clear (a lead of at least 0.01
    nats), and the texts in another order. A noul's texts are Yes and No."""
    head = draw(st.text(string.ascii_lowercase + " ", min_size=3, max_size=20).map(str.strip).filter(bool))
    if kind == "noul":
        texts = ["Yes", "No"]
    else:
        count = draw(st.integers(2, 10 if kind == "score" else 26))
        words = st.text(string.ascii_lowercase, min_size=2, max_size=7)
        texts = draw(st.lists(words, min_size=count, max_size=count, unique=True))
    values = draw(st.lists(st.floats(-6.0, 0.0), min_size=len(texts), max_size=len(texts)))
    totals = logits(head, texts, dict(zip(texts, values, strict=True)))
    best = draw(st.integers(0, len(texts) - 1))
    values[best] += max(totals) - totals[best] + draw(st.floats(0.01, 4.0))
    return head, dict(zip(texts, values, strict=True)), draw(st.permutations(texts))


def sharpened(distribution: dict[str, float], temperature: float) -> dict[str, float]:
    weights = {text: p ** (1.0 / temperature) for text, p in distribution.items()}
    return {text: weight / math.fsum(weights.values()) for text, weight in weights.items()}


def temperature_of(kind: str, values: dict) -> float:
    chosen = Settings(**values)
    return chosen.score_temperature if kind == "score" and chosen.score_temperature is not None else chosen.temperature


def check_answer(kind: str, answer: dict, head: str, scores: dict[str, float], temperature: float) -> None:
    """`answer` serves one uncorrected readout: the content's best and its distribution, at `temperature`."""
    expected = sharpened(readout_distribution(head, scores, list(scores)), temperature)
    if kind == "noul":
        assert (answer["noul"] > 0.5) == (best_text(head, scores) == "Yes")
        assert answer["noul"] == pytest.approx(expected["Yes"], abs=1e-6)
        return
    if kind == "choice":
        assert answer["choice"] == best_text(head, scores)
        assert answer["probabilities"] == pytest.approx({t: expected[t] for t in answer["probabilities"]}, abs=1e-6)
        return
    by_level = {answer["legend"][index]: p for index, p in answer["probabilities"].items()}
    assert max(by_level, key=by_level.__getitem__) == best_text(head, scores)
    assert by_level == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("variant", list(VARIANTS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_served_answer_is_the_contents_best_in_any_order(engines, variant, kind, data):
    head, scores, reordered = data.draw(questions(kind))
    for order in (list(scores), reordered):
        check_answer(
            kind,
            served(engines[variant], kind, head, scores, order),
            head,
            scores,
            temperature_of(kind, VARIANTS[variant]),
        )


@pytest.mark.parametrize("kind", TYPES)
def test_the_default_reads_each_question_once(chat, kind):
    model = KnowingModel(chat)
    engine = Engine(Settings(), chat, model)
    scores = {"keep": 0.0, "drop": -1.0, "wait": -2.0} if kind != "noul" else {"Yes": 0.0, "No": -1.0}
    for _ in range(2):
        served(engine, kind, "what now", scores, list(scores))
    assert model.reads == 2


@pytest.mark.parametrize("kind", TYPES)
def test_a_content_free_division_removes_what_the_model_knows(chat, kind):
    """The calibration setting serves the content without the knowledge: argmax(content), not one readout's
    argmax(content + knowledge), wherever the two differ."""
    head = "which fits"
    texts = ["Yes", "No"] if kind == "noul" else ["alpha", "beta", "gamma"]
    known = dict(zip(texts, logits(head, texts, {}), strict=True))
    # The content favours what the model knows least of by half the knowledge between them: knowledge
    # outweighs it in one readout.
    least, most = min(known, key=known.__getitem__), max(known, key=known.__getitem__)
    assert known[most] - known[least] > 0.5
    scores = {text: -15.0 for text in texts} | {least: 0.0, most: -(known[most] - known[least]) / 2}
    assert best_text(head, scores) == most
    engine = Engine(Settings(contextual_calibration=kind), chat, KnowingModel(chat))
    answer = served(engine, kind, head, scores, texts)
    if kind == "noul":
        assert (answer["noul"] > 0.5) == (least == "Yes")
    elif kind == "choice":
        assert answer["choice"] == least
    else:
        assert answer["legend"][max(answer["probabilities"], key=answer["probabilities"].__getitem__)] == least


class UnusableModel(KnowingModel):
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        return LabelLogprobs((math.nan,) * len(call.label_token_ids), len(call.input_ids), None)


def test_an_unusable_first_readout_is_the_backends_error(chat):
    with pytest.raises(BackendError, match="unusable label logprobs"):
        served(
            Engine(Settings(), chat, UnusableModel(chat)),
            "choice",
            "pick",
            {"keep": 0.0, "drop": -1.0},
            ["keep", "drop"],
        )
