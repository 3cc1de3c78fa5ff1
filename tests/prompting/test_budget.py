"""The token budgets as pure functions over counts (prompting/budget.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.errors import RequestRejected
from openjev.prompting.budget import LONG_CONTEXT_HEADER, STANDARD_INPUT_TOKENS, TokenBudget
from openjev.prompting.encoding import PromptEncoder
from openjev.prompting.tokenizer import ChatTokenizer

BUDGET = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 400)


def test_the_tighter_of_the_setting_and_the_context_names_the_limit() -> None:
    assert TokenBudget.of(120, 400, None) == TokenBudget(120, "OPENJEV_MAX_INPUT_TOKENS", 400)
    assert TokenBudget.of(120, 400, 94).branch_limit_name == "the backend's context length"
    assert TokenBudget.of(120, 400, 120).branch_limit_name == "OPENJEV_MAX_INPUT_TOKENS"


def test_without_the_long_context_header_the_official_budget_applies_too() -> None:
    standard = TokenBudget.of(262144, 10**6, 131072, long_context=False)
    assert standard.branch_limit == STANDARD_INPUT_TOKENS == 32768
    assert f"{LONG_CONTEXT_HEADER}: true" in standard.branch_limit_name
    assert TokenBudget.of(262144, 10**6, 131072, long_context=True).branch_limit == 131072
    # Under the official budget already, the header changes nothing.
    assert TokenBudget.of(120, 400, None, long_context=False) == TokenBudget.of(120, 400, None, long_context=True)


def test_encode_limits_are_lengths_past_which_every_completion_is_over() -> None:
    prefix_limit, *suffix_limits = BUDGET.encode_limits(3)
    assert suffix_limits == [98, 98, 98]
    # A prefix one past its limit is over the total with the shortest suffixes (one token each) ...
    assert BUDGET.first_pass_tokens(prefix_limit + 1, [1, 1, 1]) + 3 > 400
    # ... and one at the limit can still fit.
    assert BUDGET.first_pass_tokens(prefix_limit, [1, 1, 1]) + 3 <= 400
    assert BUDGET.encode_limits(3, known=20)[0] == prefix_limit - 20


def test_a_first_pass_names_the_state_each_long_question_once_and_the_total() -> None:
    assert [issue.loc for issue in BUDGET.first_pass_issues(99, [("q", 1)])] == [("state",)]
    issues = BUDGET.first_pass_issues(50, [("long", 60), ("long", 70), ("short", 5)])
    assert [issue.loc for issue in issues] == [("questions", "long")]
    assert issues[0].ctx == {"limit": 100, "tokens": 111}
    assert BUDGET.first_pass_issues(50, [(f"q{i}", 10) for i in range(5)]) == []


def test_content_free_readouts_count_in_the_total() -> None:
    branches = [(f"q{i}", 10) for i in range(5)]
    readouts = [(f"q{i}", 10) for i in range(4)]
    assert BUDGET.first_pass_issues(50, branches, [*readouts, ("q4", 9)]) == []
    (issue,) = BUDGET.first_pass_issues(50, branches, [*readouts, ("q4", 11)])
    assert issue.loc == ("questions",) and issue.ctx == {"limit": 400, "tokens": 401}
    assert "5 content-free readouts of 51" in issue.msg


def test_a_content_free_readout_is_a_call_within_the_branch_limit() -> None:
    # The question fits after a 6-token state (6 + 93 + 1 = 100); its readout after a longer
    # content-free prefix would not (7 + 93 + 1 = 101).
    assert BUDGET.first_pass_issues(6, [("q", 93)], [("q", 99)]) == []
    (issue,) = BUDGET.first_pass_issues(6, [("q", 93)], [("q", 100)])
    assert issue.loc == ("questions", "q") and issue.ctx == {"limit": 100, "tokens": 101}
    assert "content-free readout" in issue.msg


def test_an_early_refusal_names_what_was_over() -> None:
    assert BUDGET.early_issue(0, 99, ["a"]).loc == ("state",)
    total = BUDGET.early_issue(0, 90, ["a", "b", "c"])
    assert total.loc == ("questions",) and total.ctx["tokens"] == 90 * 4 + 3
    question = BUDGET.early_issue(2, 99, ["a", "b"])
    assert question.loc == ("questions", "b") and question.ctx["tokens"] == 101


def test_an_escalation_costs_both_calls() -> None:
    assert TokenBudget.escalation_cost(call_one=60, generated=64, tail=3) == 60 + 60 + 64 + 1 + 3


def test_a_box_question_counts_every_id_its_generation_may_write() -> None:
    # 50 + 27 + 1 fits a readout; with a box's generation of up to 24 ids it is 101, over 100.
    assert BUDGET.first_pass_issues(50, [("where", 27)]) == []
    (issue,) = BUDGET.first_pass_issues(50, [("where", 27), ("q", 27)], generated={"where": 24})
    assert issue.loc == ("questions", "where") and issue.ctx == {"limit": 100, "tokens": 101}
    assert "+ 24 output" in issue.msg


def test_a_first_pass_that_fits_leaves_the_rest_of_the_total_and_one_over_is_refused_whole() -> None:
    branches, readouts = [("a", 10), ("b", 20)], [("a", 30)]
    # Sent: warm-up 50 + (50 + 10) + (50 + 20) + a content-free readout of 30.
    assert BUDGET.check_first_pass(50, branches, readouts, {}) == 400 - 210
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
