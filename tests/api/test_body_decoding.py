"""`decode_body`'s zstd decoding directly: one frame (its size declared or not) is decoded in one call,
everything else the careful way, and both give the same bytes, the same 400 for a frame cut short and
the same 413 past the cap."""

from __future__ import annotations

import gzip

import pytest
import zstandard

from openjev.api import body_decoding
from openjev.api.errors import HttpError

RAW = b"The order arrived late and the box was dented. " * 2000


def undeclared(data: bytes) -> bytes:
    """A frame without its content size, as a streaming compressor writes it."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def declared(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


@pytest.fixture
def careful_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the careful way ran."""
    calls: list[int] = []
    careful = body_decoding._unzstd_frames

    def counted(data: bytes, limit: int) -> bytes:
        calls.append(len(data))
        return careful(data, limit)

    monkeypatch.setattr(body_decoding, "_unzstd_frames", counted)
    return calls


@pytest.mark.parametrize("frame", [declared, undeclared])
def test_one_frame_is_decoded_in_one_call(frame, careful_calls: list[int]) -> None:
    assert body_decoding.decode_body(frame(RAW), ["zstd"], len(RAW)) == RAW
    assert careful_calls == []


@pytest.mark.parametrize(
    "data",
    [declared(RAW[:5000]) + undeclared(RAW[5000:]), declared(RAW[:1]) + declared(b"") + declared(RAW[1:])],
    ids=["two-frames", "three-frames-one-empty"],
)
def test_several_frames_are_one_stream(data: bytes, careful_calls: list[int]) -> None:
    assert body_decoding.decode_body(data, ["zstd"], len(RAW)) == RAW
    assert careful_calls == [len(data)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (declared(RAW)[:-3], "truncated"),
        (undeclared(RAW)[:-3], "truncated"),
        (declared(RAW) + declared(RAW)[:-3], "truncated"),
        (declared(RAW) + b"trailing garbage", "does not decode"),
        (declared(b"") + b"trailing garbage", "does not decode"),
        (b"not zstd at all", "does not decode"),
    ],
)
def test_a_body_that_does_not_decode_whole_is_a_400(data: bytes, message: str) -> None:
    with pytest.raises(HttpError) as refused:
        body_decoding.decode_body(data, ["zstd"], 10 * len(RAW))
    assert refused.value.status == 400 and message in str(refused.value)


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (declared(RAW), len(RAW)),
        (undeclared(RAW), len(RAW)),
        (declared(RAW[:100]) + undeclared(RAW[100:]), len(RAW)),
        (undeclared(bytes(64 << 20)), 64 << 20),
    ],
    ids=["declared", "undeclared", "two-frames", "undeclared-bomb"],
)
def test_one_byte_past_the_cap_is_a_413(data: bytes, size: int) -> None:
    with pytest.raises(HttpError) as refused:
        body_decoding.decode_body(data, ["zstd"], size - 1)
    assert refused.value.status == 413
    assert len(body_decoding.decode_body(data, ["zstd"], size)) == size


def test_a_frame_declaring_more_than_the_cap_is_refused_before_it_is_decoded(careful_calls: list[int]) -> None:
    bomb = declared(bytes(64 << 20))
    with pytest.raises(HttpError) as refused:
        body_decoding.decode_body(bomb, ["zstd"], 1 << 20)
    assert refused.value.status == 413 and careful_calls == []


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_members_and_frames_past_the_cap_are_a_400_however_empty(coding: str) -> None:
    compress = gzip.compress if coding == "gzip" else declared
    parts = [compress(RAW[i : i + 100]) for i in range(0, 100 * body_decoding.MAX_MEMBERS, 100)]
    assert body_decoding.decode_body(b"".join(parts), [coding], len(RAW)) == RAW[: 100 * body_decoding.MAX_MEMBERS]
    for extra in (compress(b""), compress(b"") * 100_000):  # one more, or 2 MB of empty ones
        with pytest.raises(HttpError) as refused:
            body_decoding.decode_body(b"".join(parts) + extra, [coding], len(RAW))
        assert refused.value.status == 400 and "members or frames" in str(refused.value)


def test_a_gzip_body_is_fed_in_pieces_whatever_its_size() -> None:
    data = gzip.compress(RAW * 40)  # 3.8 MB of text in one member
    assert len(data) > 2 * body_decoding.STEP_INPUT or len(RAW * 40) > 2 * body_decoding.STEP_OUTPUT
    assert body_decoding.decode_body(data, ["gzip"], len(RAW) * 40) == RAW * 40
    with pytest.raises(HttpError) as refused:
        body_decoding.decode_body(data, ["gzip"], len(RAW) * 40 - 1)
    assert refused.value.status == 413


@pytest.mark.parametrize("header", ["gzip, gzip", "zstd, gzip", "gzip,identity,zstd"])
def test_more_than_one_coding_is_a_415_naming_content_encoding(header: str) -> None:
    with pytest.raises(HttpError) as refused:
        body_decoding.parse_encodings(header)
    assert refused.value.status == 415 and "Content-Encoding" in str(refused.value)
    assert body_decoding.parse_encodings("identity, gzip") == ["gzip"]
