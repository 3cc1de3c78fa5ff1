"""The token budgets as pure functions over counts (prompting/budget.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.config import Settings
from openjev.errors import RequestRejected
from openjev.prompting.budget import CONTEXT_LENGTH_EXCEEDED, LONG_CONTEXT_HEADER, STANDARD_INPUT_TOKENS, TokenBudget
from openjev.prompting.encoding import PromptEncoder
from openjev.prompting.tokenizer import ChatTokenizer

BUDGET = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 400)


def test_the_tighter_of_the_setting_and_the_context_names_the_limit() -> None:
    settings = Settings(max_input_tokens=120, max_total_input_tokens=400)
    assert TokenBudget.of(settings, None) == TokenBudget(
        120, "OPENJEV_MAX_INPUT_TOKENS, the standard budget", 400, "OPENJEV_MAX_TOTAL_INPUT_TOKENS=400"
    )
    assert TokenBudget.of(settings, 94).branch_limit_name == "the backend's context length"
    assert TokenBudget.of(settings, 120).branch_limit_name.startswith("OPENJEV_MAX_INPUT_TOKENS")


def test_the_long_context_header_reaches_the_models_context_unless_the_operator_caps_it() -> None:
    standard = TokenBudget.of(Settings(), 262138)
    assert standard.branch_limit == STANDARD_INPUT_TOKENS == 32768
    assert f"{LONG_CONTEXT_HEADER}: true" in standard.branch_limit_name
    # No setting to raise first: the header alone reaches the model's context.
    assert TokenBudget.of(Settings(), 262138, long_context=True).branch_limit == 262138
    capped = TokenBudget.of(Settings(max_long_context_tokens=65536), 262138, long_context=True)
    assert capped.branch_limit == 65536 and capped.branch_limit_name == "OPENJEV_MAX_LONG_CONTEXT_TOKENS"
    # A model no longer than the standard budget: the header changes nothing, and the 422 does not offer it.
    short = TokenBudget.of(Settings(), 16384)
    assert short == TokenBudget.of(Settings(), 16384, long_context=True)
    assert LONG_CONTEXT_HEADER not in short.branch_limit_name
    # A cap below the standard budget never makes the header a loss.
    assert TokenBudget.of(Settings(max_long_context_tokens=1000), 262138, long_context=True).branch_limit == 32768


def test_the_request_budget_is_twice_the_call_budget_unless_the_operator_sets_one() -> None:
    assert TokenBudget.of(Settings(), 262138).reachable == {"per_question": 32768, "per_request": 65536}
    assert TokenBudget.of(Settings(), 262138, long_context=True).reachable == {
        "per_question": 262138,
        "per_request": 2 * 262138,
    }
    # An operator's total below the call budget is what one question can reach.
    fixed = TokenBudget.of(Settings(max_total_input_tokens=20000), 262138, long_context=True)
    assert fixed.reachable == {"per_question": 20000, "per_request": 20000}


def test_a_long_input_with_many_questions_counts_the_input_once() -> None:
    """A 29k-token input and 64 questions: the backend computes the input once, so the default budget
    holds it (counted once per question, it was 1.9M tokens)."""
    budget = TokenBudget.of(Settings(), 262138)
    branches = [(f"q{i}", 60) for i in range(64)]
    readouts = [(f"q{i}", 80) for i in range(64)]
    assert budget.first_pass_issues(29000, branches, readouts) == []
    assert budget.check_first_pass(29000, branches, readouts, {}) == 65536 - (29000 + 64 * 60 + 64 * 80)


def test_encode_limits_are_lengths_past_which_every_completion_is_over() -> None:
    assert BUDGET.encode_limits(3) == [98, 98, 98, 98]
    tight = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 60)
    prefix_limit, *suffix_limits = tight.encode_limits(3)
    assert suffix_limits == [98, 98, 98]
    # A prefix one past its limit is over the total with the shortest suffixes (one token each) ...
    assert tight.first_pass_tokens(prefix_limit + 1, [1, 1, 1]) > 60
    # ... and one at the limit can still fit.
    assert tight.first_pass_tokens(prefix_limit, [1, 1, 1]) <= 60
    assert tight.encode_limits(3, known=20)[0] == prefix_limit - 20


def test_a_first_pass_names_the_state_each_long_question_once_and_the_total() -> None:
    assert [issue.loc for issue in BUDGET.first_pass_issues(99, [("q", 1)])] == [("state",)]
    issues = BUDGET.first_pass_issues(50, [("long", 60), ("long", 70), ("short", 5)])
    assert [issue.loc for issue in issues] == [("questions", "long")]
    assert issues[0].ctx == {"limit": 100, "tokens": 111}
    assert BUDGET.first_pass_issues(50, [(f"q{i}", 10) for i in range(5)]) == []


def test_content_free_readouts_count_in_the_total() -> None:
    budget = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 150)
    branches = [(f"q{i}", 10) for i in range(5)]
    readouts = [(f"q{i}", 10) for i in range(4)]
    # The input once (50), the five suffixes (50), the readouts (49 or 51).
    assert budget.first_pass_issues(50, branches, [*readouts, ("q4", 9)]) == []
    (issue,) = budget.first_pass_issues(50, branches, [*readouts, ("q4", 11)])
    assert issue.loc == ("questions",) and issue.ctx == {"limit": 150, "tokens": 151}
    assert "5 content-free readouts of 51" in issue.msg


def test_an_overflow_names_the_input_when_the_input_is_the_problem_in_openais_words() -> None:
    budget = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 60, "OPENJEV_MAX_TOTAL_INPUT_TOKENS=60")
    # 58 + 3 calls of one token each is over 60: no shorter question fits, the input must shrink.
    (issue,) = budget.first_pass_issues(58, [("a", 1), ("b", 1), ("c", 1)])
    assert issue.loc == ("state",) and issue.type == CONTEXT_LENGTH_EXCEEDED
    assert issue.msg.startswith("This model's maximum context length is 60 tokens per request")
    assert "reduce the length of the input" in issue.msg
    (issue,) = budget.first_pass_issues(40, [("a", 10), ("b", 11)])
    assert issue.loc == ("questions",) and "reduce the length of the questions" in issue.msg
    (issue,) = BUDGET.first_pass_issues(99, [("q", 1)])
    assert "maximum context length is 100 tokens per question" in issue.msg and issue.type == CONTEXT_LENGTH_EXCEEDED


def test_a_content_free_readout_is_a_call_within_the_branch_limit() -> None:
    # The question fits after a 6-token state (6 + 93 + 1 = 100); its readout after a longer
    # content-free prefix would not (7 + 93 + 1 = 101).
    assert BUDGET.first_pass_issues(6, [("q", 93)], [("q", 99)]) == []
    (issue,) = BUDGET.first_pass_issues(6, [("q", 93)], [("q", 100)])
    assert issue.loc == ("questions", "q") and issue.ctx == {"limit": 100, "tokens": 101}
    assert "content-free readout" in issue.msg


def test_an_early_refusal_names_what_was_over() -> None:
    assert BUDGET.early_issue(0, 99, ["a"]).loc == ("state",)
    total = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 60).early_issue(0, 90, ["a", "b", "c"])
    assert total.loc == ("state",) and total.ctx["tokens"] == 90 + 3
    question = BUDGET.early_issue(2, 99, ["a", "b"])
    assert question.loc == ("questions", "b") and question.ctx["tokens"] == 101


def test_an_escalation_costs_both_calls() -> None:
    # Call 1's own tokens after the shared prefix, then what call 2 adds to call 1.
    assert TokenBudget.escalation_cost(own=60, generated=64, tail=3) == 60 + 64 + 1 + 3


def test_a_box_question_counts_every_id_its_generation_may_write() -> None:
    # 50 + 27 + 1 fits a readout; with a box's generation of up to 24 ids it is 101, over 100.
    assert BUDGET.first_pass_issues(50, [("where", 27)]) == []
    (issue,) = BUDGET.first_pass_issues(50, [("where", 27), ("q", 27)], generated={"where": 24})
    assert issue.loc == ("questions", "where") and issue.ctx == {"limit": 100, "tokens": 101}
    assert "+ 24 output" in issue.msg


def test_a_first_pass_that_fits_leaves_the_rest_of_the_total_and_one_over_is_refused_whole() -> None:
    branches, readouts = [("a", 10), ("b", 20)], [("a", 30)]
    # Computed: the input 50 once + 10 + 20 + a content-free readout of 30.
    assert BUDGET.check_first_pass(50, branches, readouts, {}) == 400 - 110
    with pytest.raises(RequestRejected) as refused:
        BUDGET.check_first_pass(50, [("a", 60), ("b", 70)], [], {"b": 3})
    assert list(refused.value.issues) == BUDGET.first_pass_issues(50, [("a", 60), ("b", 70)], generated={"b": 3})
    assert [issue.loc for issue in refused.value.issues] == [("questions", "a"), ("questions", "b")]


def test_encoding_within_the_budget_refuses_a_prompt_once_it_is_certainly_over(qwen_tokenizer_dir: Path) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    prompts = [[("a short state", False)], [("a short question", False)]]
    assert BUDGET.encode_within(encoder, prompts, 0, [0, 0], ["q"]) == [chat.encode(text) for ((text, _),) in prompts]
    # A question of far more text than any call may hold: refused after the first round, by its id.
    text = "\n".join(f"record {i}: {'x' * (i % 50)} ✓" for i in range(4000))
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [prompts[0], [(text, False)]], 0, [0, 0], ["q"])
    (issue,) = refused.value.issues
    assert issue.loc == ("questions", "q") and "at least" in issue.msg
    # A long state: the tokens known already and the positions its images take count in the early issue.
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [[(text, False)], prompts[1]], 7, [5, 0], ["q"])
    (issue,) = refused.value.issues
    counted = issue.ctx["tokens"]
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [[(text, False)], prompts[1]], 0, [0, 0], ["q"])
    assert issue.loc == ("state",) and counted == refused.value.issues[0].ctx["tokens"] + 12
