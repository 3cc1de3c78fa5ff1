"""Score and noul readouts freed of label bias: the pure maths, the engine's views, and the real API on the fake SGLang.

A stand-in backend reads the prompt it is given: for a score it finds the levels shown (`A: text` or
`1: text`) and answers `content(level) x position_prior(position)`; over the content-free state it
answers the position prior alone. So every correction has an exact expected answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import httpx
import pytest

from openjev.answering.box_reading import BoxReading
from openjev.answering.debias import CONTENT_FREE_STATE, combine_log_space, debiased, divide_prior, mirrored
from openjev.answering.readouts import MAX_SHIFTED_OPTIONS, QuestionViews
from openjev.backends.base import BackendError, LabelLogprobs, ReadoutCall
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.prompts import frame_conversation
from openjev.prompting.question_texts import ANSWER_CUES
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import ChoiceQuestion, NoulQuestion
from tests.conftest import ServeOpenJev
from tests.test_engine_shifts import PromptReadingModel, ask

CONTENT = {"calm": 0.1, "busy": 0.2, "tense": 0.3, "fire": 0.4}
POSITION_PRIOR = [0.1, 0.1, 0.7, 0.1]
SCORE = {"type": "score", "instructions": "How bad is it?", "criteria": list(CONTENT)}
NOUL = {"type": "noul", "instructions": "Is it on fire?"}


def test_log_space_combination_and_prior_division() -> None:
    p = [0.2, 0.3, 0.5]
    assert combine_log_space([p, p]) == pytest.approx(p)
    assert combine_log_space([[0.8, 0.2], [0.2, 0.8]]) == pytest.approx([0.5, 0.5])
    assert divide_prior(p, [1 / 3] * 3) == pytest.approx(p)
    assert divide_prior(p, p) == pytest.approx([1 / 3] * 3)
    assert mirrored(p) == [0.5, 0.3, 0.2]
    # Each view divided by its own prior, then combined: a pure position prior disappears.
    content = [0.1, 0.2, 0.7]
    prior = [0.6, 0.3, 0.1]
    seen = [c * q for c, q in zip(content, prior, strict=True)]
    assert debiased("score", [seen, seen], [prior, prior]) == pytest.approx(content)
    assert debiased("score", [seen], [None]) == pytest.approx(seen)


class PositionBiasedModel(PromptReadingModel):
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        text = self.read_prompt(call)
        shown = re.findall(r"^(?:[A-D]|[1-4]): (\w+)$", text, flags=re.MULTILINE)
        content_free = f"\n{CONTENT_FREE_STATE}<|im_end|>" in text
        if len(call.label_token_ids) == 2:  # a noul: yes 0.8 on content, 0.5 over the content-free state
            p_yes = 0.5 if content_free else 0.8
            logprobs = (math.log(p_yes * 0.5), math.log((1 - p_yes) * 1.5))  # a model that leans to No
        elif shown and len(shown) == len(call.label_token_ids):
            values = [POSITION_PRIOR[j] * (1.0 if content_free else CONTENT[word]) for j, word in enumerate(shown)]
            logprobs = tuple(math.log(v) for v in values)
        else:  # the warm-up
            logprobs = tuple(0.0 for _ in call.label_token_ids)
        return LabelLogprobs(logprobs, len(call.input_ids), None)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir):
    return ChatTokenizer(qwen_tokenizer_dir)


def normalised(values: list[float]) -> list[float]:
    return [v / sum(values) for v in values]


def test_the_plain_readout_keeps_the_position_bias(chat) -> None:
    answers, calls = ask(
        Engine(Settings(contextual_calibration="", score_temperature=None), chat, PositionBiasedModel(chat)),
        {"s": SCORE},
    )
    expected = normalised([CONTENT[w] * POSITION_PRIOR[j] for j, w in enumerate(CONTENT)])
    assert list(answers["s"]["probabilities"].values()) == pytest.approx(expected) and calls == 2


def test_the_reversed_rubric_is_a_second_branch_combined_in_log_space(chat) -> None:
    backend = PositionBiasedModel(chat)
    engine = Engine(Settings(score_reverse=True, contextual_calibration="", score_temperature=None), chat, backend)
    answers, calls = ask(engine, {"s": SCORE, "n": NOUL})
    assert calls == 1 + 2 + 1
    assert "A: fire\nB: tense\nC: busy\nD: calm" in "".join(backend.prompts)
    levels = list(CONTENT)
    geometric = [
        math.sqrt(CONTENT[w] * POSITION_PRIOR[i] * CONTENT[w] * POSITION_PRIOR[3 - i]) for i, w in enumerate(levels)
    ]
    assert list(answers["s"]["probabilities"].values()) == pytest.approx(normalised(geometric))
    assert answers["s"]["score"] == pytest.approx(sum(i * p for i, p in enumerate(normalised(geometric))))


def test_digit_labels_number_the_levels(chat) -> None:
    backend = PositionBiasedModel(chat)
    engine = Engine(Settings(score_labels="digits"), chat, backend)
    answers, _ = ask(engine, {"s": SCORE})
    assert "1: calm\n2: busy\n3: tense\n4: fire" in backend.prompts[-1]
    assert "Answer with the number of the level" in backend.prompts[-1]
    assert list(answers["s"]["legend"].values()) == list(CONTENT)
    eight = {"type": "score", "criteria": [f"level{i}" for i in range(12)]}  # more than 9 levels: letters
    ask(engine, {"long": eight})
    assert "L: level11" in backend.prompts[-1]


def test_contextual_calibration_divides_out_the_content_free_prior_and_caches_it(chat) -> None:
    backend = PositionBiasedModel(chat)
    engine = Engine(Settings(contextual_calibration="score,noul", score_temperature=None), chat, backend)
    answers, calls = ask(engine, {"s": SCORE, "n": NOUL})
    assert calls == 1 + 2 + 2  # warm-up, two questions, two content-free readouts
    assert list(answers["s"]["probabilities"].values()) == pytest.approx(normalised(list(CONTENT.values())))
    assert answers["n"]["noul"] == pytest.approx(0.8)
    again, calls = ask(engine, {"other id": SCORE})
    assert calls == 2 and again["other id"]["probabilities"] == answers["s"]["probabilities"]
    # Types not listed are read as before.
    plain, _ = ask(Engine(Settings(contextual_calibration="noul"), chat, backend), {"s": SCORE})
    assert plain["s"]["probabilities"]["2"] > 0.5


def test_the_score_temperature_sharpens_the_calibrated_levels_and_leaves_other_types(chat) -> None:
    backend = PositionBiasedModel(chat)
    engine = Engine(
        Settings(contextual_calibration="score,noul", score_temperature=0.5, temperature=2.0), chat, backend
    )
    answers, _ = ask(engine, {"s": SCORE, "n": NOUL})
    sharpened = normalised([value**2 for value in CONTENT.values()])  # p^(1/T), T = 0.5
    assert list(answers["s"]["probabilities"].values()) == pytest.approx(sharpened)
    assert answers["s"]["score"] == pytest.approx(sum(i * p for i, p in enumerate(sharpened)))
    # A noul keeps OPENJEV_TEMPERATURE: p(yes) 0.8 at T = 2 is 0.8^0.5 / (0.8^0.5 + 0.2^0.5).
    assert answers["n"]["noul"] == pytest.approx(math.sqrt(0.8) / (math.sqrt(0.8) + math.sqrt(0.2)))


def test_the_answer_cue_can_differ_per_question_type(chat) -> None:
    backend = PositionBiasedModel(chat)
    ask(Engine(Settings(answer_cue_score="json"), chat, backend), {"s": SCORE, "n": NOUL})
    endings = sorted(prompt[-14:] for prompt in backend.prompts[1:])
    assert any(ending.endswith('{"answer": "') for ending in endings)
    assert any(ending.endswith("Answer:\n") for ending in endings)
    with pytest.raises(ValueError, match="unknown question type"):
        Settings(contextual_calibration="score,essay")


def test_the_settings_work_through_the_api_on_the_fake_sglang(
    serve_openjev: ServeOpenJev, fake_sglang, qwen_tokenizer_dir
) -> None:
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir),
        env={
            "OPENJEV_SCORE_LABELS": "digits", "OPENJEV_SCORE_REVERSE": "true",
            "OPENJEV_CONTEXTUAL_CALIBRATION": "score,noul", "OPENJEV_ANSWER_CUE_NOUL": "json",
        },
    )  # fmt: skip
    body = {"model": "jev-latest", "state": "The kitchen is on fire.", "questions": {"s": SCORE, "n": NOUL}}
    first = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
    assert first.status_code == 200, first.text
    answers = first.json()["answers"]
    assert sum(answers["s"]["probabilities"].values()) == pytest.approx(1.0) and 0 <= answers["n"]["noul"] <= 1
    # Billed: one answer per question; the backend read the warm-up, the score in two views, the noul,
    # and one content-free readout per view of each question.
    assert first.json()["usage"]["output_tokens"] == 2
    assert first.headers["x-openjev-backend-output-tokens"] == str(1 + 3 + 3)
    second = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
    # Its prefix cached (no warm-up) and its priors known (no content-free readouts): the three branches.
    assert second.json()["usage"]["output_tokens"] == 2 and second.headers["x-openjev-backend-output-tokens"] == "3"
    assert second.json()["answers"] == answers


def test_score_and_noul_settings_leave_choice_questions_untouched(chat) -> None:
    """Why MMLU (choice only) cannot move under the score and noul settings: same prompts, same answers."""
    choice = {"type": "choice", "instructions": "Which?", "criteria": {"a": "calm", "b": "fire"}}
    plain_backend, tuned_backend = PositionBiasedModel(chat), PositionBiasedModel(chat)
    plain, _ = ask(Engine(Settings(contextual_calibration="score"), chat, plain_backend), {"c": choice})
    tuned_settings = Settings(
        score_labels="digits", score_reverse=True, contextual_calibration="score,noul", answer_cue_score="json"
    )
    tuned, _ = ask(Engine(tuned_settings, chat, tuned_backend), {"c": choice})
    assert tuned == plain and tuned_backend.prompts == plain_backend.prompts


@dataclass(frozen=True)
class Viewed:
    question_id: str
    question: object
    offset: int = 0


def test_views_plan_one_prompt_per_view_after_the_shared_prefix(chat) -> None:
    views = QuestionViews(Settings(option_shifts=2), chat)
    frame = frame_conversation(chat, [{"role": "user", "content": "The state."}], "")
    choice = ChoiceQuestion(type="choice", instructions="Pick.", criteria={"x": None, "y": None})
    planned, prompts = views.plan({"n": NoulQuestion(type="noul", instructions="Calm?"), "c": choice}, frame, None)
    assert [(qid, view) for qid, _, view, _, _ in planned] == [("n", 0), ("c", 0), ("c", 1)]
    assert [tuple(row[3:]) for row in planned[1:]] == [views.text(choice, 0), views.text(choice, 1)]
    assert prompts[0] == frame.shared_prefix_segments
    cue = ANSWER_CUES[views.cue(choice)]
    assert prompts[2] == frame.with_cue(cue).question_suffix_segments(planned[1][3], False)


def test_long_option_lists_are_read_once_whatever_the_shifts(chat) -> None:
    views = QuestionViews(Settings(option_shifts=2), chat)
    short = ChoiceQuestion(type="choice", criteria={f"o{i}": None for i in range(MAX_SHIFTED_OPTIONS)})
    long = ChoiceQuestion(type="choice", criteria={f"o{i}": None for i in range(MAX_SHIFTED_OPTIONS + 1)})
    assert len(views.views(short)) == 2 and views.views(long) == [0]


def test_answers_gather_each_questions_readouts_and_pass_a_box_through(chat) -> None:
    views = QuestionViews(Settings(option_shifts=2, contextual_calibration=""), chat)
    choice = ChoiceQuestion(type="choice", instructions="Pick.", criteria={"x": None, "y": None})
    box = {"type": "box", "box": [1, 2, 3, 4]}
    branches = [Viewed("c", choice, 0), Viewed("b", None), Viewed("c", choice, 1)]
    results = [LabelLogprobs((-0.2, -1.8), 9, None), BoxReading(box, 9, None, 5), LabelLogprobs((-1.5, -0.3), 9, None)]
    readouts, answers = views.answers(branches, results, [None, None, None])
    assert readouts == {"c": [(0, (-0.2, -1.8), None), (1, (-1.5, -0.3), None)]}
    assert list(answers) == ["c", "b"] and answers["b"] is box
    assert answers["c"] == views.answer(choice, readouts["c"])
    with pytest.raises(BackendError, match="unusable label logprobs"):
        views.answers(branches[:1], [LabelLogprobs((math.nan, -1.0), 9, None)], [None])
