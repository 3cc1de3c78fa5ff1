"""`split_body` finds each delimiter with one search: parts come back byte for byte whatever they hold
(CRLFs, dashes, most of the boundary), a part past its cap is refused without its delimiter being
looked for past the cap, and what RFC 2046 forbids (a boundary over 70 characters, the boundary inside
a part) is a 400, never a 500."""

from __future__ import annotations

import random

import httpx
import pytest

from openjev.api import multipart
from openjev.api.errors import HttpError
from openjev.errors import RequestRejected

REQUEST = b'{"model": "jev-latest"}'
BOUNDARY = "0123456789abcdef0123456789abcdef"


def body_of(parts: dict[str, bytes], boundary: str = BOUNDARY) -> tuple[bytes, str]:
    files = {"request": (None, REQUEST, "application/json")}
    files |= {name: (f"{name}.png", data, "image/png") for name, data in parts.items()}
    content_type = f"multipart/form-data; boundary={boundary}"
    built = httpx.Request("POST", "http://x/", files=files, headers={"content-type": content_type})
    return built.read(), content_type


def false_starts(rng: random.Random, size: int) -> bytes:
    """Random bytes strewn with the starts of a delimiter: CRLF, dashes, most of the boundary."""
    pieces = [b"\r\n--" + BOUNDARY.encode()[: rng.randrange(len(BOUNDARY))], b"\r\n-", b"\r", b"--"]
    out = bytearray()
    while len(out) < size:
        out += rng.randbytes(rng.randrange(1, 40)) + rng.choice(pieces)
    return bytes(out)


@pytest.mark.parametrize("seed", range(4))
def test_parts_come_back_whole_whatever_they_hold(seed: int) -> None:
    rng = random.Random(seed)
    parts = {"a": false_starts(rng, 300_000) + b"\r\n--\r", "b": rng.randbytes(70_003), "c": b"\r\n", "d": b""}
    body, content_type = body_of(parts)
    request, split = multipart.split_body(body, content_type, 1 << 20, 5, 1 << 20)
    assert request == REQUEST and split == parts
    assert all(type(data) is bytes for data in split.values())


def test_a_part_past_its_cap_is_refused_without_looking_past_the_cap() -> None:
    body, content_type = body_of({"big": bytes(4 << 20)})
    with pytest.raises(RequestRejected) as refused:
        multipart.split_body(body, content_type, 1 << 20, 4, 1 << 20)
    assert refused.value.issues[0].loc == ("big",)
    # The same part with no closing boundary at all: refused for its size, the rest never searched.
    cut = body[: body.index(b"\r\n--" + BOUNDARY.encode() + b"--")]
    with pytest.raises(RequestRejected):
        multipart.split_body(cut, content_type, 1 << 20, 4, 1 << 20)
    with pytest.raises(HttpError, match="closing boundary"):
        multipart.split_body(cut, content_type, 1 << 20, 4, 8 << 20)


@pytest.mark.parametrize(
    ("body", "content_type", "words"),
    [
        (b"--" + b"b" * 300 + b"--\r\n", "multipart/form-data; boundary=" + "b" * 300, "at most 70 characters"),
        (
            body_of({"a": b"x\r\n--" + BOUNDARY.encode() + b"X"})[0],
            f"multipart/form-data; boundary={BOUNDARY}",
            "appears inside a part",
        ),
        (b"no boundary here", f"multipart/form-data; boundary={BOUNDARY}", "holds no boundary"),
        (
            b"--" + BOUNDARY.encode() + b"\r\n" + b"X" * 20_000,
            f"multipart/form-data; boundary={BOUNDARY}",
            "head is missing",
        ),
        (b"--x--", "multipart/form-data", "needs a boundary"),
    ],
    ids=["long-boundary", "boundary-inside", "no-boundary", "endless-head", "no-boundary-parameter"],
)
def test_what_rfc_2046_forbids_is_a_400(body: bytes, content_type: str, words: str) -> None:
    with pytest.raises(HttpError) as refused:
        multipart.split_body(body, content_type, 1 << 20, 4, 1 << 20)
    assert refused.value.status == 400 and words in str(refused.value)
