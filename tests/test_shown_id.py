"""A named id in a refusal (`errors.shown_id`): whole when short, clipped by the one rule (`errors.clipped`)
when long, whichever stage refuses it."""

from __future__ import annotations

from openjev.errors import SHOWN_ID, clipped, json_bytes, shown_id


def test_a_short_id_is_shown_whole_and_a_long_one_clipped_by_the_one_rule() -> None:
    assert shown_id("task_0123456789abcdef") == "'task_0123456789abcdef'"
    long = "x" * 10_000
    shown = shown_id(long)
    assert shown == repr(clipped(long, SHOWN_ID))
    assert shown.endswith("characters more)'")
    assert json_bytes(shown[1:-1]) <= SHOWN_ID
