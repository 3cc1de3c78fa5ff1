"""The engine's answer step: option rotations as extra branches, the answer cue, the calibration file.

A stand-in backend reads the prompt it is given: it finds which option text sits at which letter
and answers `content(option) x position_prior(letter)`, a model with a known letter bias.
"""

import asyncio
import json
import math
import re
from pathlib import Path

import pytest

from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall
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
        if not shown:  # the warm-up or a noul question
            logprobs = tuple(math.log(0.5) for _ in call.label_token_ids)
        else:
            logprobs = tuple(math.log(CONTENT[word] * POSITION_PRIOR[j]) for j, word in enumerate(shown))
        return LabelLogprobs(logprobs, len(call.input_ids), None)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir):
    return ChatTokenizer(qwen_tokenizer_dir)


def ask(engine: Engine, questions: dict) -> tuple[dict, int]:
    request = SystemOneRequest.model_validate({"model": "jev-latest", "state": "Pick one.", "questions": questions})
    evaluation = asyncio.run(engine.evaluate(engine.prepare(request)))
    return evaluation.answers, evaluation.output_tokens


CHOICE = {"type": "choice", "criteria": {"w": "wrong", "c": "close", "o": "other", "r": "right"}}


def test_one_rotation_reads_the_letter_bias(chat):
    answers, calls = ask(Engine(Settings(), chat, LetterBiasedModel(chat)), {"q": CHOICE})
    assert answers["q"]["choice"] == "w" and calls == 2


def test_four_rotations_are_four_branches_keyed_by_the_original_names(chat):
    backend = LetterBiasedModel(chat)
    engine = Engine(Settings(option_shifts=4), chat, backend)
    answers, calls = ask(engine, {"q": CHOICE, "yes": {"type": "noul", "instructions": "Is it?"}})
    assert calls == 1 + 4 + 1  # warm-up, four rotations, the noul question once
    assert list(answers["q"]["probabilities"]) == ["w", "c", "o", "r"]
    # Averaging spreads the letter bias evenly; the prior correction removes it.
    assert answers["q"]["choice"] == "r"
    assert set(answers) == {"q", "yes"} and answers["yes"]["type"] == "noul"
    prior, _ = ask(Engine(Settings(option_shifts=4, label_prior=True), chat, backend), {"q": CHOICE})
    assert list(prior["q"]["probabilities"].values()) == pytest.approx(list(CONTENT.values()))


def test_the_json_cue_ends_every_question_turn(chat):
    backend = LetterBiasedModel(chat)
    ask(Engine(Settings(answer_cue="json"), chat, backend), {"q": CHOICE})
    assert backend.prompts[-1].endswith('{"answer": "')


def test_the_calibration_temperature_replaces_the_setting_for_its_bucket(chat, tmp_path: Path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": FORMAT, "temperatures": {"choice": {"3-4": 2.0}}}))
    engine = Engine(Settings(calibration_file=path, temperature=5.0), chat, LetterBiasedModel(chat))
    assert engine.calibration_source == str(path)
    answers, _ = ask(engine, {"q": CHOICE, "two": {"type": "choice", "criteria": {"a": "wrong", "b": "right"}}})
    shown = [CONTENT[w] * POSITION_PRIOR[j] for j, w in enumerate(["wrong", "close", "other", "right"])]
    expected = [math.sqrt(p) / sum(math.sqrt(x) for x in shown) for p in shown]
    assert list(answers["q"]["probabilities"].values()) == pytest.approx(expected)
    # No entry for 2 options: OPENJEV_TEMPERATURE applies.
    two = [(0.1 * 0.7) ** 0.2, (0.4 * 0.1) ** 0.2]
    assert answers["two"]["probabilities"]["a"] == pytest.approx(two[0] / sum(two))
    assert Engine(Settings(), chat, LetterBiasedModel(chat)).calibration_source is None
