"""The engine's answer step: option rotations as extra branches, the answer cue, the calibration file.

A stand-in backend reads the prompt it is given: it finds which option text sits at which letter
and answers `content(option) x position_prior(letter)`, a model with a known letter bias; over the
content-free state it answers `position_prior(letter)` alone. Expected answers are the content's.
"""

import asyncio
import json
import math
import re
from pathlib import Path

import pytest

from openjev.backends.base import Backend, Generation, GenerationCall, LabelLogprobs, ReadoutCall
from openjev.calibration import FORMAT
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest

CONTENT = {"wrong": 0.1, "close": 0.2, "other": 0.3, "right": 0.4}
POSITION_PRIOR = [0.7, 0.1, 0.1, 0.1]


class PromptReadingModel(Backend):
    """A stand-in model that answers from its prompt read back as text; keeps every prompt."""

    def __init__(self, chat: ChatTokenizer) -> None:
        self.chat = chat
        self.prompts: list[str] = []

    def read_prompt(self, call: ReadoutCall) -> str:
        text = self.chat.tokenizer.decode(list(call.input_ids), skip_special_tokens=False)
        self.prompts.append(text)
        return text


class LetterBiasedModel(PromptReadingModel):
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        text = self.read_prompt(call)
        shown = re.findall(r"^[A-D]: (\w+)$", text, flags=re.MULTILINE)
        content_free = "user\nN/A<|im_end|>" in text
        if not shown:  # the warm-up or a noul question
            logprobs = tuple(math.log(0.5) for _ in call.label_token_ids)
        else:
            content = [1.0 if content_free else CONTENT[word] for word in shown]
            logprobs = tuple(math.log(c * POSITION_PRIOR[j]) for j, c in enumerate(content))
        return LabelLogprobs(logprobs, len(call.input_ids), None)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir):
    return ChatTokenizer(qwen_tokenizer_dir)


def ask(engine: Engine, questions: dict) -> tuple[dict, int]:
    request = SystemOneRequest.model_validate({"model": "jev-latest", "state": "Pick one.", "questions": questions})
    evaluation = asyncio.run(engine.evaluate(engine.prepare(request)))
    return evaluation.answers, evaluation.output_tokens


CHOICE = {"type": "choice", "criteria": {"w": "wrong", "c": "close", "o": "other", "r": "right"}}


UNCALIBRATED = "score"  # OPENJEV_CONTEXTUAL_CALIBRATION without choice
CALIBRATED = "choice,score"
TRUTH = [value / sum(CONTENT.values()) for value in CONTENT.values()]


def test_one_uncalibrated_rotation_reads_the_letter_bias(chat):
    settings = Settings(option_shifts=1, contextual_calibration=UNCALIBRATED)
    answers, calls = ask(Engine(settings, chat, LetterBiasedModel(chat)), {"q": CHOICE})
    assert answers["q"]["choice"] == "w" and calls == 2


def test_each_rotation_is_divided_by_its_content_free_readout(chat):
    settings = Settings(option_shifts=2, contextual_calibration=CALIBRATED)
    answers, calls = ask(Engine(settings, chat, LetterBiasedModel(chat)), {"q": CHOICE})
    # The first rotation, calibrated, is unsure (top 0.4): the second is read too, each with its own
    # content-free readout, and both give the content.
    assert calls == 1 + 2 + 2
    assert list(answers["q"]["probabilities"].values()) == pytest.approx(TRUTH)
    assert answers["q"]["choice"] == "r"


def test_a_sure_first_rotation_is_read_alone(chat):
    settings = Settings(option_shifts=2, rotation_skip_above=0.3, contextual_calibration=CALIBRATED)
    engine = Engine(settings, chat, LetterBiasedModel(chat))
    answers, calls = ask(engine, {"q": CHOICE})
    assert calls == 1 + 1 + 1  # the warm-up, the first rotation and its content-free readout
    assert list(answers["q"]["probabilities"].values()) == pytest.approx(TRUTH)


@pytest.mark.parametrize("average", ["probability", "log"])
def test_four_rotations_are_four_branches_keyed_by_the_original_names(chat, average):
    backend = LetterBiasedModel(chat)
    engine = Engine(
        Settings(option_shifts=4, contextual_calibration=UNCALIBRATED, rotation_average=average), chat, backend
    )
    answers, calls = ask(engine, {"q": CHOICE, "yes": {"type": "noul", "instructions": "Is it?"}})
    assert calls == 1 + 4 + 1  # warm-up, four rotations (the first is unsure), the noul question once
    assert list(answers["q"]["probabilities"]) == ["w", "c", "o", "r"]
    # Every option sat once at the favoured first letter: its pull no longer decides.
    assert answers["q"]["choice"] == "r"
    assert set(answers) == {"q", "yes"} and answers["yes"]["type"] == "noul"


def test_the_json_cue_ends_every_question_turn(chat):
    backend = LetterBiasedModel(chat)
    ask(Engine(Settings(answer_cue="json"), chat, backend), {"q": CHOICE})
    assert backend.prompts[-1].endswith('{"answer": "')


def test_the_calibration_temperature_replaces_the_setting_for_its_bucket(chat, tmp_path: Path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": FORMAT, "temperatures": {"choice": {"3-4": 2.0}}}))
    settings = Settings(calibration_file=path, temperature=5.0, option_shifts=1, contextual_calibration=UNCALIBRATED)
    engine = Engine(settings, chat, LetterBiasedModel(chat))
    assert engine.calibration_source == str(path)
    answers, _ = ask(engine, {"q": CHOICE, "two": {"type": "choice", "criteria": {"a": "wrong", "b": "right"}}})
    shown = [CONTENT[w] * POSITION_PRIOR[j] for j, w in enumerate(["wrong", "close", "other", "right"])]
    expected = [math.sqrt(p) / sum(math.sqrt(x) for x in shown) for p in shown]
    assert list(answers["q"]["probabilities"].values()) == pytest.approx(expected)
    # No entry for 2 options: OPENJEV_TEMPERATURE applies.
    two = [(0.1 * 0.7) ** 0.2, (0.4 * 0.1) ** 0.2]
    assert answers["two"]["probabilities"]["a"] == pytest.approx(two[0] / sum(two))
    assert Engine(Settings(), chat, LetterBiasedModel(chat)).calibration_source is None


class StateReadingScoreModel(PromptReadingModel):
    """Reads a level with a letter bias times, unless the state is the content-free one, the truth; its
    thoughts are two ids and the think-close."""

    BIAS, TRUTH = (0.6, 0.3, 0.1), (0.1, 0.2, 0.7)

    def __init__(self, chat: ChatTokenizer) -> None:
        super().__init__(chat)
        self.generations = 0

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        content_free = "N/A" in self.read_prompt(call)
        if len(call.label_token_ids) != 3:  # the warm-up
            return LabelLogprobs((0.0,) * len(call.label_token_ids), len(call.input_ids), None)
        shown = self.BIAS if content_free else [b * t for b, t in zip(self.BIAS, self.TRUTH, strict=True)]
        return LabelLogprobs(tuple(math.log(p) for p in shown), len(call.input_ids), None)

    async def generate(self, call: GenerationCall) -> Generation:
        self.generations += 1
        close = self.chat.tokenizer.token_to_id("</think>")
        return Generation((*self.chat.encode("ok"), close), len(call.input_ids), None, "stop")


SCORE = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Major"]}


@pytest.mark.parametrize("reverse", [False, True])
def test_an_escalated_score_keeps_its_contextual_calibration_and_views(chat, reverse):
    settings = Settings(
        think_margin=1000,
        think_max_share=1,
        think_budget_tokens=8,
        score_reverse=reverse,
        contextual_calibration="score",
    )
    model = StateReadingScoreModel(chat)
    engine = Engine(settings, chat, model)
    request = SystemOneRequest.model_validate({"model": "openjev-think", "state": "Pick.", "questions": {"s": SCORE}})
    evaluation = asyncio.run(engine.evaluate(engine.prepare(request)))
    assert evaluation.escalation is not None and evaluation.escalation.thought == 1
    assert model.generations == (2 if reverse else 1)  # one thought per view the first pass read
    truth = [t / sum(model.TRUTH) for t in model.TRUTH]
    if not reverse:  # the reversed view of this stand-in reads the bias on reversed letters: only forward is exact
        assert list(evaluation.answers["s"]["probabilities"].values()) == pytest.approx(truth)


class TwoRankScoreModel(StateReadingScoreModel):
    """The score stand-in on two data-parallel ranks that reports no reuse (0 cached tokens)."""

    def __init__(self, chat: ChatTokenizer) -> None:
        super().__init__(chat)
        self.in_flight_seen: list[int] = []
        self.engine: Engine | None = None

    @property
    def data_parallel_size(self) -> int:
        return 2

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        result = await super().readout(call)
        assert self.engine is not None and self.engine.router is not None
        self.in_flight_seen.append(sum(stats.in_flight for stats in self.engine.router.ranks))
        return LabelLogprobs(result.logprobs, result.prompt_tokens, 0)

    async def generate(self, call: GenerationCall) -> Generation:
        generation = await super().generate(call)
        return Generation(generation.output_ids, generation.prompt_tokens, 0, generation.finish_reason)


def test_every_call_of_a_thinking_request_counts_on_its_rank(chat):
    settings = Settings(
        think_margin=1000, think_max_share=1, think_budget_tokens=8, score_reverse=True, contextual_calibration="score"
    )
    model = TwoRankScoreModel(chat)
    engine = model.engine = Engine(settings, chat, model)
    request = SystemOneRequest.model_validate({"model": "openjev-think", "state": "Pick.", "questions": {"s": SCORE}})
    evaluation = asyncio.run(engine.evaluate(engine.prepare(request)))
    assert engine.router is not None and evaluation.escalation is not None
    # Warm-up, two views, their two content-free readouts, two thoughts and their two readouts.
    assert sum(stats.prompt_tokens for stats in engine.router.ranks) == evaluation.input_tokens
    assert set(model.in_flight_seen) == {1 + 2 + 2 + 2 * 2}
