"""The choice correction is sound: on a model with no letter bias (`tests/fake_sglang/content_only.py`) the
served answer is the content's, whatever order the options come in, under the default settings and every
selectable variant. Each property is checked against the content the stand-in was given (its scores),
never against the code that combines readouts."""

from __future__ import annotations

import asyncio
import json
import math
import string

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.backends.base import Backend, BackendError, LabelLogprobs, ReadoutCall
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest
from tests.conftest import running_stack
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.content_only import content_only_logprobs

#: The default, then each variant a setting selects (docs/settings.md).
VARIANTS = {
    "default": {},
    "calibrated": {"contextual_calibration": "choice,score"},
    "two rotations, gated": {"option_shifts": 2, "contextual_calibration": "choice,score"},
    "log average": {"option_shifts": 2, "rotation_average": "log", "contextual_calibration": "choice,score"},
    "every rotation read": {"option_shifts": 2, "rotation_skip_above": 1.0, "contextual_calibration": "choice,score"},
    "never a second rotation": {
        "option_shifts": 2,
        "rotation_skip_above": 0.0,
        "contextual_calibration": "choice,score",
    },
    "uncalibrated rotations": {"option_shifts": 2},
    "four rotations, log": {"option_shifts": 4, "rotation_average": "log", "rotation_skip_above": 1.0},
}


class ContentOnlyModel(Backend):
    """The content-only stand-in as a backend; counts its readouts."""

    def __init__(self, chat: ChatTokenizer) -> None:
        self.logprobs = content_only_logprobs(chat.directory)
        #: The label ids of each question readout (not the warm-ups, which read one id).
        self.reads: list[int] = []

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        if len(call.label_token_ids) > 1:
            self.reads.append(len(call.label_token_ids))
        return LabelLogprobs(tuple(self.logprobs(call.input_ids, call.label_token_ids)), len(call.input_ids), None)


@pytest.fixture(scope="module")
def engines(qwen_tokenizer_dir) -> dict[str, Engine]:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    return {name: Engine(Settings(**values), chat, ContentOnlyModel(chat)) for name, values in VARIANTS.items()}


def served(engine: Engine, scores: dict[str, float], order: list[str]) -> dict:
    """The choice answer to a question listing the options in `order`, over a state giving `scores`."""
    question = {"type": "choice", "criteria": {text: None for text in order}}
    body = {"model": "jev-latest", "state": json.dumps(scores), "questions": {"q": question}}
    evaluation = asyncio.run(engine.evaluate(engine.prepare(SystemOneRequest.model_validate(body))))
    return evaluation.answers["q"]


@st.composite
def questions(draw: st.DrawFn) -> tuple[dict[str, float], list[str]]:
    """Option texts (1-26) with content scores whose best is clear, and the same options in another order."""
    count = draw(st.integers(1, 26))
    words = st.text(string.ascii_lowercase, min_size=2, max_size=7)
    texts = draw(st.lists(words, min_size=count, max_size=count, unique=True))
    values = draw(st.lists(st.floats(-9.0, 0.0), min_size=count, max_size=count))
    # One option clearly best (its lead at least 0.01 nats), anywhere in the list.
    values[draw(st.integers(0, count - 1))] = max(values) + draw(st.floats(0.01, 4.0))
    return dict(zip(texts, values, strict=True)), draw(st.permutations(texts))


def content_distribution(scores: dict[str, float]) -> dict[str, float]:
    top = max(scores.values())
    weights = {text: math.exp(value - top) for text, value in scores.items()}
    return {text: weight / sum(weights.values()) for text, weight in weights.items()}


@pytest.mark.parametrize("variant", list(VARIANTS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=questions())
def test_the_served_choice_is_the_contents_best_in_any_order(engines, variant, question):
    scores, reordered = question
    best = max(scores, key=scores.__getitem__)
    as_sent, shuffled = served(engines[variant], scores, list(scores)), served(engines[variant], scores, reordered)
    assert as_sent["choice"] == shuffled["choice"] == best
    # What a single readout of this model serves: the content's distribution (T = 1, the content-free
    # readout is flat), in any order.
    expected = content_distribution(scores)
    assert as_sent["probabilities"] == pytest.approx(expected, abs=1e-9)
    assert shuffled["probabilities"] == pytest.approx(expected, abs=1e-9)


def test_a_sure_first_readout_is_one_readout_once_its_content_free_readout_is_cached(engines):
    engine = engines["two rotations, gated"]
    model = engine.backend
    assert isinstance(model, ContentOnlyModel)

    def readouts(scores: dict[str, float]) -> int:
        before = len(model.reads)
        served(engine, scores, list(scores))
        return len(model.reads) - before

    # Sure (top probability 0.97, above OPENJEV_ROTATION_SKIP_ABOVE): the first rotation alone, with its
    # content-free readout the first time its question text is seen.
    assert readouts({"keep": 0.0, "drop": -4.0, "wait": -5.0}) == 1 + 1
    assert readouts({"keep": 0.0, "drop": -5.0, "wait": -4.0}) == 1
    # Unsure: both rotations, each with its own content-free readout the first time.
    assert readouts({"stay": 0.0, "go": -0.1, "hold": -0.2}) == 2 + 2
    assert readouts({"stay": -0.2, "go": -0.1, "hold": 0.0}) == 2


@pytest.fixture(scope="module")
def content_only_stack(qwen_tokenizer_dir, tmp_path_factory):
    """openjev with default settings over the fake SGLang serving the content-only stand-in."""
    fake = FakeSGLang(logprobs=content_only_logprobs(qwen_tokenizer_dir))
    with running_stack(fake, qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=questions())
def test_the_server_serves_the_contents_best_in_any_order(content_only_stack, question):
    server, _ = content_only_stack
    scores, reordered = question
    answers = []
    for order in (list(scores), reordered):
        body = {
            "model": "jev-latest",
            "state": json.dumps(scores),
            "questions": {"q": {"type": "choice", "criteria": {text: None for text in order}}},
        }
        response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 200, response.text
        answers.append(response.json()["answers"]["q"])
    assert answers[0]["choice"] == answers[1]["choice"] == max(scores, key=scores.__getitem__)
    assert answers[0]["probabilities"] == pytest.approx(content_distribution(scores), abs=1e-6)
    assert answers[1]["probabilities"] == pytest.approx(content_distribution(scores), abs=1e-6)


class UnusableModel(ContentOnlyModel):
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        return LabelLogprobs((math.nan,) * len(call.label_token_ids), len(call.input_ids), None)


def test_an_unusable_first_readout_is_the_backends_error(qwen_tokenizer_dir):
    chat = ChatTokenizer(qwen_tokenizer_dir)
    with pytest.raises(BackendError, match="unusable label logprobs"):
        served(Engine(Settings(), chat, UnusableModel(chat)), {"keep": 0.0, "drop": -1.0}, ["keep", "drop"])
