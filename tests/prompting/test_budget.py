"""The token budgets as pure functions over counts (prompting/budget.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.config import Settings
from openjev.errors import Overloaded, RequestRejected
from openjev.prompting.budget import (
    CONTEXT_LENGTH_EXCEEDED,
    LONG_CONTEXT_HEADER,
    REQUEST_FACTOR,
    STANDARD_INPUT_TOKENS,
    TokenBudget,
)
from openjev.prompting.encoding import PromptEncoder
from openjev.prompting.tokenizer import ChatTokenizer

BUDGET = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 400)


def test_the_tighter_of_the_setting_and_the_context_names_the_limit() -> None:
    settings = Settings(max_input_tokens=120, max_total_input_tokens=400)
    assert TokenBudget.of(settings, None) == TokenBudget(
        120, "OPENJEV_MAX_INPUT_TOKENS, the standard budget", 400, "OPENJEV_MAX_TOTAL_INPUT_TOKENS=400", 120
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
    # No source but openjev's own capacity choice: the 422 says so.
    assert "openjev's capacity default" in TokenBudget.of(Settings(), 262138).total_limit_name
    # openjev's own calls reach the model's context, with or without the header.
    assert TokenBudget.of(Settings(), 262138).own_call_limit == 262138
    assert TokenBudget.of(Settings(), 262138, long_context=True).reachable == {
        "per_question": 262138,
        "per_request": 2 * 262138,
    }
    # An operator's total below the call budget is what one question can reach.
    fixed = TokenBudget.of(Settings(max_total_input_tokens=20000), 262138, long_context=True)
    assert fixed.reachable == {"per_question": 20000, "per_request": 20000}


def test_a_long_input_with_many_choices_counts_the_callers_text_alone() -> None:
    """A 29,390-token input and 190 four-option choices: the caller sent the input once and each choice
    once (about 50,565 tokens), within the default 65,536; openjev's second rotation of each choice and
    its content-free readouts are its own, never the caller's (they made it 71,735)."""
    budget = TokenBudget.of(Settings(), 262138)
    asked = [(f"q{i}", 111) for i in range(190)]
    own = [(f"q{i}", 29390 + 111) for i in range(190)] + [(f"q{i}", 400) for i in range(190)]
    assert budget.first_pass_issues(29390, asked) == []
    # What is left for the thinking tier: the budget less the caller's text, never less openjev's calls.
    assert budget.check_first_pass(29390, asked, own, {}) == 65536 - 29390 - 190 * 111
    # Questions of more text than the budget: refused, counting questions, never readouts.
    (issue,) = budget.first_pass_issues(29390, [*asked, *[(f"more{i}", 111) for i in range(136)]])
    assert issue.loc == ("questions",) and issue.ctx == {"limit": 65536, "tokens": 29390 + 326 * 111}
    assert "326 questions of" in issue.msg and "readout" not in issue.msg
    assert "OPENJEV_MAX_TOTAL_INPUT_TOKENS unset: openjev's capacity default" in issue.msg


def test_a_first_pass_names_the_state_each_long_question_and_the_total() -> None:
    assert [issue.loc for issue in BUDGET.first_pass_issues(99, [("q", 1)])] == [("state",)]
    issues = BUDGET.first_pass_issues(50, [("long", 60), ("short", 5)])
    assert [issue.loc for issue in issues] == [("questions", "long")]
    assert issues[0].ctx == {"limit": 100, "tokens": 111}
    assert BUDGET.first_pass_issues(50, [(f"q{i}", 10) for i in range(5)]) == []


def test_an_overflow_names_the_input_when_the_input_is_the_problem_in_openais_words() -> None:
    budget = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 60, "OPENJEV_MAX_TOTAL_INPUT_TOKENS=60")
    # 58 + 3 questions of one token each is over 60: no shorter question fits, the input must shrink.
    (issue,) = budget.first_pass_issues(58, [("a", 1), ("b", 1), ("c", 1)])
    assert issue.loc == ("state",) and issue.type == CONTEXT_LENGTH_EXCEEDED
    assert issue.msg.startswith("This model's maximum context length is 60 tokens per request")
    assert "reduce the length of the input" in issue.msg
    (issue,) = budget.first_pass_issues(40, [("a", 10), ("b", 11)])
    assert issue.loc == ("questions",) and "reduce the length of the questions" in issue.msg
    (issue,) = BUDGET.first_pass_issues(99, [("q", 1)])
    assert "maximum context length is 100 tokens per question" in issue.msg and issue.type == CONTEXT_LENGTH_EXCEEDED


def test_openjevs_own_calls_are_a_capacity_matter_never_the_callers() -> None:
    budget = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 150, own_limit=200)
    # A rotation one token past the per-question limit, within the server's capacity: served.
    budget.check_first_pass(6, [("q", 93)], [("q", 6 + 95), ("q", 199)], {})
    # Past the capacity: a 529 (Overloaded), not a 422 that blames the request.
    with pytest.raises(Overloaded) as refused:
        budget.check_first_pass(6, [("q", 93)], [("q", 200)], {})
    assert "'q'" in refused.value.message and "within its token budget" in refused.value.message


def test_a_box_question_counts_every_id_its_generation_may_write() -> None:
    # 50 + 27 + 1 fits a readout; with a box's generation of up to 24 ids it is 101, over 100.
    assert BUDGET.first_pass_issues(50, [("where", 27)]) == []
    (issue,) = BUDGET.first_pass_issues(50, [("where", 27), ("q", 27)], generated={"where": 24})
    assert issue.loc == ("questions", "where") and issue.ctx == {"limit": 100, "tokens": 101}
    assert "+ 24 output" in issue.msg


def test_a_first_pass_over_is_refused_whole() -> None:
    with pytest.raises(RequestRejected) as refused:
        BUDGET.check_first_pass(50, [("a", 60), ("b", 70)], [], {"b": 3})
    assert list(refused.value.issues) == BUDGET.first_pass_issues(50, [("a", 60), ("b", 70)], generated={"b": 3})
    assert [issue.loc for issue in refused.value.issues] == [("questions", "a"), ("questions", "b")]


def test_encoding_within_the_budget_refuses_a_prompt_once_it_is_certainly_over(qwen_tokenizer_dir: Path) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    prompts = [[("a short state", False)], [("a short question", False)]]
    expected = [chat.encode(text) for ((text, _),) in prompts]
    assert BUDGET.encode_within(encoder, prompts, 0, [0, 0], ["q"], [True]) == expected
    # A question of far more text than any call may hold: refused after the first round, by its id.
    text = "\n".join(f"record {i}: {'x' * (i % 50)} ✓" for i in range(4000))
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [prompts[0], [(text, False)]], 0, [0, 0], ["q"], [True])
    (issue,) = refused.value.issues
    assert issue.loc == ("questions", "q") and "at least" in issue.msg
    # A long state: the tokens known already and the positions its images take count in the early issue.
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [[(text, False)], prompts[1]], 7, [5, 0], ["q"], [True])
    (issue,) = refused.value.issues
    counted = issue.ctx["tokens"]
    with pytest.raises(RequestRejected) as refused:
        BUDGET.encode_within(encoder, [[(text, False)], prompts[1]], 0, [0, 0], ["q"], [True])
    assert issue.loc == ("state",) and counted == refused.value.issues[0].ctx["tokens"] + 12


def test_text_far_over_the_request_budget_costs_about_the_budget_in_tokenizing(qwen_tokenizer_dir: Path) -> None:
    """200 questions of about 3,000 tokens each, every one within its call, 600k together: refused once
    their sum is certainly over 65,536, after tokenizing about that much (it was all of it)."""
    chat = ChatTokenizer(qwen_tokenizer_dir)
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    budget = TokenBudget.of(Settings(), 262138)
    questions = [" ".join(f"q{q} example {i} says yes" for i in range(500)) for q in range(200)]
    prompts = [[("a short state", False)], *([(text, False)] for text in questions)]
    ids = [f"q{q}" for q in range(200)]
    with pytest.raises(RequestRejected) as refused:
        budget.encode_within(encoder, prompts, 0, [0] * 201, ids, [True] * 200)
    (issue,) = refused.value.issues
    assert issue.loc == ("questions",) and "at least" in issue.msg and issue.ctx["tokens"] > 65536
    assert 65536 < encoder.tokenized < 1.25 * 65536


def test_openjevs_own_views_are_encoded_after_the_callers_and_never_charged(qwen_tokenizer_dir: Path) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    budget = TokenBudget(100, "OPENJEV_MAX_INPUT_TOKENS", 60, own_limit=100)
    state, question = " ".join(["word"] * 20), " ".join(["item"] * 30)
    # The question as sent (20 + 30 + 1) fits; its own view too, though both together are over 60.
    prompts = [[(state, False)], [(question, False)], [(question + " again", False)]]
    encoded = budget.encode_within(encoder, prompts, 0, [0, 0, 0], ["q", "q"], [True, False])
    assert encoded == [chat.encode(text) for ((text, _),) in prompts]
    # An own view past the server's per-call capacity, found as it is encoded: a 529, not a 422.
    more = [(" ".join(["more"] * 20000), False)]
    with pytest.raises(Overloaded):
        budget.encode_within(encoder, [*prompts[:2], more], 0, [0] * 3, ["q", "q"], [True, False])
    assert encoder.tokenized < 20000 / 2


def test_the_budget_figures_the_docs_quote_are_the_codes() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    api, how = (docs / "api.md").read_text(), (docs / "how-it-works.md").read_text()
    per_question, per_request = STANDARD_INPUT_TOKENS, REQUEST_FACTOR * STANDARD_INPUT_TOKENS
    assert f"| {per_question:,} (`OPENJEV_MAX_INPUT_TOKENS`, TypeSafe's figure)" in api
    assert f"| {per_request:,} (`OPENJEV_MAX_TOTAL_INPUT_TOKENS` where set; unset, twice the per-question" in api
    assert f"(`REQUEST_FACTOR` = {REQUEST_FACTOR} times the per-question budget)" in api
    assert f"openjev's capacity default, {REQUEST_FACTOR} x {per_question} per" in api.replace("\n", " ")
    assert f"unset {'twice' if REQUEST_FACTOR == 2 else REQUEST_FACTOR} the per-question budget" in how
    assert TokenBudget.of(Settings(), None).total_limit == per_request
