"""The thinking tier's pure parts: the margin, the escalation policy, and the two calls' token ids
built with the real Qwen3 tokenizer and chat template (its thinking mode)."""

import math

import pytest

from openjev.answering.escalation import EscalationPolicy, escalation_calls, margin, share_cap
from openjev.answering.readouts import QuestionViews
from openjev.answering.thinking import Thinker, reading
from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall
from openjev.backends.slots import BackendSlots
from openjev.config import Settings
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import ChoiceQuestion


def test_margin_is_the_top_two_log_gap():
    assert margin({"type": "noul", "noul": 0.5}) == 0.0
    assert margin({"type": "noul", "noul": 0.2}) == pytest.approx(math.log(4))
    choice = {"type": "choice", "probabilities": {"a": 0.1, "b": 0.6, "c": 0.3}}
    assert margin(choice) == pytest.approx(math.log(2))
    assert margin({"type": "score", "probabilities": {"0": 1.0, "1": 0.0}}) == pytest.approx(-math.log(1e-12))


def test_share_cap_rounds_up_without_float_noise():
    assert share_cap(0.2, 1) == 1 and share_cap(0.2, 5) == 1 and share_cap(0.2, 6) == 2
    assert share_cap(0.7, 10) == 7 and share_cap(0.0, 10) == 0 and share_cap(1.0, 3) == 3


def test_least_confident_first_and_only_below_the_margin():
    policy = EscalationPolicy(threshold=1.0, max_share=1.0, window=100)
    chosen = policy.select([("a", 0.9), ("b", 0.1), ("c", 3.0), ("d", 0.5)])
    assert chosen == ["b", "d", "a"]


def test_a_request_takes_at_most_its_own_share():
    policy = EscalationPolicy(threshold=10.0, max_share=0.25, window=1000)
    assert policy.select([(str(i), float(i)) for i in range(8)]) == ["0", "1"]


def test_the_window_share_holds_and_unused_budget_does_not_pile_up():
    policy = EscalationPolicy(threshold=1.0, max_share=0.2, window=10)
    # Nine confident questions leave the window's budget unused ...
    assert policy.select([(str(i), 5.0) for i in range(9)]) == []
    # ... but a request of five unsure ones still escalates only ceil(0.2 * 5) = 1.
    assert policy.select([(f"u{i}", 0.1 * i) for i in range(5)]) == ["u0"]
    # The window (last 10: four confident, then 1 of 5 escalated, then this one) allows ceil(2) - 1 = 1.
    assert policy.select([("x", 0.0)]) == ["x"]
    # Now the window holds 2 escalations in its last 10 questions: the next unsure one keeps its answer.
    assert policy.select([("y", 0.0)]) == []
    assert policy.escalated_share == pytest.approx(0.2)


def test_share_one_with_a_huge_margin_escalates_everything():
    policy = EscalationPolicy(threshold=1000.0, max_share=1.0, window=3)
    for _ in range(3):
        assert sorted(policy.select([("a", 50.0), ("b", 0.0), ("c", 7.0), ("d", 1.0)])) == ["a", "b", "c", "d"]


class _Idle(Backend):
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:  # pragma: no cover - never called
        raise AssertionError


@pytest.fixture(scope="module")
def qwen3_thinker(qwen_tokenizer_dir):
    chat = ChatTokenizer(qwen_tokenizer_dir)
    return chat, Thinker(Settings(think_budget_tokens=16), chat, _Idle(), BackendSlots(1), ["Answer:\n"])


def test_qwen3_thinks_in_its_own_thinking_mode(qwen3_thinker):
    chat, thinker = qwen3_thinker
    assert thinker.mode == "template" and thinker.budget == 16
    close = chat.tokenizer.token_to_id("</think>")
    assert thinker.close_id == close and thinker.stop_ids[0] == close
    assert chat.tokenizer.token_to_id("<|im_end|>") in thinker.stop_ids
    suffix = chat.tokenizer.decode(thinker.call_one_suffix("Is it raining?"), skip_special_tokens=False)
    # Thinking on: the assistant turn opens without an empty thinking block.
    assert suffix.startswith("<|im_start|>user\nIs it raining?<|im_end|>\n<|im_start|>assistant\n")
    assert "</think>" not in suffix
    assert chat.tokenizer.decode(thinker.tails["Answer:\n"]) == "\n\nAnswer:\n"


def test_call_two_keeps_the_generated_ids_and_closes_a_budget_cut(qwen3_thinker):
    chat, thinker = qwen3_thinker
    close, end = thinker.close_id, chat.tokenizer.token_to_id("<|im_end|>")
    prompt, thought, cue = [1, 2, 3], [11, 12, 13], "Answer:\n"
    tail = thinker.tails[cue]
    # Stopped at the close: nothing added but the tail.
    assert thinker.call_two_ids(prompt, [*thought, close], cue) == [*prompt, *thought, close, *tail]
    # The budget ran out: a forced close.
    assert thinker.call_two_ids(prompt, thought, cue) == [*prompt, *thought, close, *tail]
    # The model ended its turn: the end id goes, the close comes.
    assert thinker.call_two_ids(prompt, [*thought, end], cue) == [*prompt, *thought, close, *tail]


def test_a_request_larger_than_the_window_leaves_it_within_the_share():
    policy = EscalationPolicy(threshold=1.0, max_share=0.25, window=4)
    # Twelve unsure questions, the surest first: the least confident ones are the last four.
    chosen = policy.select([(f"q{i}", 0.9 - 0.05 * i) for i in range(12)])
    assert len(chosen) == 3  # ceil(0.25 * 12)
    # The window keeps the last four questions: they hold ceil(0.25 * 4) = 1 escalation, not 3.
    assert policy.escalated_share == pytest.approx(0.25)
    assert chosen[0] == "q11" and set(chosen[1:]) == {"q7", "q6"}


def test_the_rank_counts_two_calls_per_view_of_the_questions_with_the_most_views():
    # Three questions (a read in 3 views, b in 2, c in 1); a share of 0.5 lets ceil(1.5) = 2 escalate.
    assert escalation_calls(["a", "a", "a", "b", "b", "c"], 0.5) == 2 * (3 + 2)
    assert escalation_calls(["a", "b"], 0.0) == 0
    assert escalation_calls(["a", "b", "b"], 1.0) == 2 * 3


def test_an_escalated_question_is_read_again_in_every_view_of_its_first_pass(qwen_tokenizer_dir):
    chat = ChatTokenizer(qwen_tokenizer_dir)
    views = QuestionViews(Settings(option_shifts=2, answer_cue_choice="json"), chat)
    question = ChoiceQuestion(type="choice", instructions="Pick.", criteria={"x": None, "y": None, "z": None})
    first_pass = {"q": [(0, [-0.1, -2.0, -3.0], None), (1, [-2.0, -3.0, -0.1], [-1.0, -1.1, -1.2])]}
    again = reading(views, {"q": question}, first_pass, "q")
    assert [(view.offset, view.prior) for view in again.views] == [(0, None), (1, [-1.0, -1.1, -1.2])]
    assert [(view.text, view.labels) for view in again.views] == [views.text(question, 0), views.text(question, 1)]
    assert again.cue == '{"answer": "'
    assert again.answer(first_pass["q"]) == views.answer(question, first_pass["q"])
