"""How much text a request brings (request/sizes.py)."""

from __future__ import annotations

from openjev.request.sizes import many_text_bytes, text_bytes


def test_text_bytes_counts_utf8_bytes_and_stops_past_the_limit() -> None:
    assert text_bytes({"ab": ["é", 1, None, {"k": "€"}]}, 100) == 2 + 2 + 1 + 1 + 1 + 3
    assert text_bytes(["x" * 50] * 100, 120) <= 120 + 50
    assert many_text_bytes(["abc", "dé"], 100) == 6
