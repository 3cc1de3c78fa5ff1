"""`usage` as pure counts (answering/usage.py): the input once, each question's own prompt once."""

from __future__ import annotations

from openjev.answering.usage import Usage, billed


def test_the_input_counts_once_whatever_the_number_of_questions() -> None:
    # A 13,800-token input and ten questions of 40 tokens: 14,200, not eleven times the input.
    usage = billed(13800, [(40, 1, 13800)] * 10, warmed=True, warm_cached=0)
    assert usage == Usage(13800 + 10 * 40, 10, 0)


def test_cached_tokens_are_what_earlier_requests_left_of_the_callers_input() -> None:
    # The warm-up found 1,000 of the 1,200-token prefix; one question's suffix was cached too (asked before).
    usage = billed(1200, [(30, 1, 1230), (20, 1, 1200)], warmed=True, warm_cached=1000)
    assert usage.cached_tokens == 1000 + 30
    # The warm-up skipped (the prefix certainly cached): the least any question found stands for the prefix.
    assert billed(1200, [(30, 1, 1229), (20, 1, 1200)], warmed=False, warm_cached=None).cached_tokens == 1200 + 29
    # Never more than the caller sent.
    assert billed(10, [(5, 1, 500)], warmed=True, warm_cached=500).cached_tokens == 15


def test_a_backend_that_reports_no_cache_gives_none_and_outputs_add_up() -> None:
    assert billed(100, [(5, 1, None)], warmed=False, warm_cached=None).cached_tokens is None
    assert billed(100, [(5, 1, 100)], warmed=True, warm_cached=None).cached_tokens is None
    # A box question's generation writes several ids; thinking adds its reasoning tokens.
    usage = billed(100, [(5, 1, 0), (7, 12, 0)], warmed=True, warm_cached=0)
    assert usage.output_tokens == 13 and usage.with_reasoning(40).output_tokens == 53
