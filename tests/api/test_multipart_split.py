"""`split_body` feeds the parser FEED_BYTES at a time: parts come back byte for byte wherever a piece
ends (inside a part, on its boundary's CRLF, inside the boundary), and a part past its cap is refused
within one piece of the cap."""

from __future__ import annotations

import random

import httpx
import pytest

from openjev.api import multipart
from openjev.errors import RequestRejected

REQUEST = b'{"model": "jev-latest"}'


def body_of(parts: dict[str, bytes]) -> tuple[bytes, str]:
    files = {"request": (None, REQUEST, "application/json")}
    files |= {name: (f"{name}.png", data, "image/png") for name, data in parts.items()}
    built = httpx.Request("POST", "http://x/", files=files)
    return built.read(), built.headers["content-type"]


@pytest.mark.parametrize("shift", [-70, -40, -2, -1, 0, 1, 2, 40])
def test_parts_come_back_whole_wherever_a_piece_ends(shift: int) -> None:
    rng = random.Random(shift)
    head, _ = body_of({"a": b""})
    # The first image part ends `shift` bytes from the end of the third piece: its boundary is cut there.
    first = rng.randbytes(3 * multipart.FEED_BYTES - head.index(b"a.png") - 200 + shift) + b"\r\n--\r"
    parts = {"a": first, "b": rng.randbytes(multipart.FEED_BYTES + 3), "c": b"\r\n"}
    body, content_type = body_of(parts)
    assert len(body) > 4 * multipart.FEED_BYTES
    request, split = multipart.split_body(body, content_type, 1 << 20, 4, 1 << 20)
    assert request == REQUEST and split == parts
    assert all(type(data) is bytes for data in split.values())


def test_a_part_past_its_cap_is_refused_within_a_piece_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    body, content_type = body_of({"big": bytes(40 * multipart.FEED_BYTES)})
    fed: list[int] = []
    write = multipart.MultipartParser.write

    def counted(self: multipart.MultipartParser, data: bytes) -> int:
        fed.append(len(data))
        return write(self, data)

    monkeypatch.setattr(multipart.MultipartParser, "write", counted)
    with pytest.raises(RequestRejected) as refused:
        multipart.split_body(body, content_type, 1 << 20, 4, 4 * multipart.FEED_BYTES)
    assert refused.value.issues[0].loc == ("big",)
    assert max(fed) <= multipart.FEED_BYTES and sum(fed) <= 6 * multipart.FEED_BYTES
