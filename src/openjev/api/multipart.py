"""`multipart/form-data` bodies as the official SDK sends image assets (RFC 7578), parsed with python-multipart.

Contract: `split_body(body, content_type, max_json_bytes, max_parts, max_part_bytes)` returns the JSON
of the part named `request` and every other part's bytes by its name (the assets' `part` values claim
them). A body that does not parse, a part without a name, two parts of one name, or no `request` part
is a 400 or 422 naming the part; a `request` part over `max_json_bytes` (OPENJEV_MAX_BODY_BYTES, the
JSON body's own cap) is a 413, any other part over `max_part_bytes` (OPENJEV_MAX_IMAGE_BYTES) a 422
naming it, as soon as the parser passes the cap; a body of more than `max_parts` parts (the request
and one per image) is a 422 as soon as the parser meets the part past it, so a body of many tiny parts
costs no more than a few, and one of a huge part no more than its cap. Part headers are bounded by
python-multipart (8 headers of 4 KiB at most); the whole body was bounded by `BodyDecoder` already,
and is parsed from memory, once, FEED_BYTES at a time (`fast_path` runs a large one on a worker
thread), and each part's pieces are joined once (`bytes.join` copies a large part without the GIL).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from openjev.api.errors import HttpError
from openjev.errors import Issue, RequestRejected

#: The part that holds the request's JSON body.
REQUEST_PART = "request"
#: Bytes fed to the parser at a time: each of its searches and copies holds the GIL (and so the event
#: loop, where a worker thread splits) for a fraction of a millisecond, and a part past its cap is
#: refused within one piece of its cap, however much of the body is left.
FEED_BYTES = 256 * 1024


class _TooManyParts(Exception):
    pass


class _PartTooLarge(Exception):
    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit


def _part_name(headers: dict[bytes, bytes]) -> str:
    _, disposition = parse_options_header(headers.get(b"content-disposition"))
    return disposition.get(b"name", b"").decode("utf-8", "replace")


@dataclass
class _Collector:
    """python-multipart's callbacks: each part's headers and bytes, in order, `max_parts` at most, the
    `request` part `max_json_bytes` at most and any other `max_part_bytes`: a part is refused as soon as
    it passes its cap, so a body of one huge part costs no more than its cap."""

    max_parts: int
    max_json_bytes: int
    max_part_bytes: int
    parts: list[tuple[dict[bytes, bytes], list[bytes]]] = field(default_factory=list)
    _field: bytearray = field(default_factory=bytearray)
    _value: bytearray = field(default_factory=bytearray)
    _name: str = ""
    _limit: int = 0
    _size: int = 0

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_part_data": self._part_data,
            "on_header_field": lambda data, start, end: self._field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
        }

    def _part_begin(self) -> None:
        if len(self.parts) == self.max_parts:
            raise _TooManyParts
        self.parts.append(({}, []))
        self._size = 0

    def _header_end(self) -> None:
        self.parts[-1][0][bytes(self._field).lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        self._name = _part_name(self.parts[-1][0])
        self._limit = self.max_json_bytes if self._name == REQUEST_PART else self.max_part_bytes

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        self._size += end - start
        if self._size > self._limit:
            raise _PartTooLarge(self._name, self._limit)
        # A whole piece fed to the parser is kept as it is; the pieces are joined in `split_body`.
        self.parts[-1][1].append(data if start == 0 and end == len(data) else data[start:end])


def _bad(message: str) -> HttpError:
    return HttpError(400, "invalid_body", message)


def _parse(body: bytes, content_type: str, collector: _Collector) -> list[tuple[dict[bytes, bytes], list[bytes]]]:
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise _bad("a multipart/form-data body needs a boundary in its Content-Type")
    max_parts = collector.max_parts
    parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
    try:
        for offset in range(0, len(body), FEED_BYTES):
            parser.write(body[offset : offset + FEED_BYTES])
        parser.finalize()
    except MultipartParseError as error:
        raise _bad(f"the multipart/form-data body does not parse: {error}") from error
    except _PartTooLarge as over:
        if over.name == REQUEST_PART:
            raise _request_too_large(over.limit) from None
        message = f"the part {over.name!r} is over the limit of {over.limit} bytes (OPENJEV_MAX_IMAGE_BYTES)"
        raise RequestRejected([Issue((over.name,), message, "too_long", {"limit": over.limit})]) from None
    except _TooManyParts:
        message = (
            f"a multipart body holds at most {max_parts} parts: the request and one per image (OPENJEV_MAX_IMAGES)"
        )
        raise RequestRejected([Issue(("assets",), message, "too_long", {"max_length": max_parts})]) from None
    return collector.parts


def _request_too_large(limit: int) -> HttpError:
    message = f"the 'request' part is over the limit of {limit} bytes (OPENJEV_MAX_BODY_BYTES)"
    return HttpError(413, "request_too_large", message)


def split_body(
    body: bytes, content_type: str, max_json_bytes: int, max_parts: int, max_part_bytes: int
) -> tuple[bytes, dict[str, bytes]]:
    """(the `request` part's JSON, the other parts by name); the module's contract."""
    named: dict[str, bytes] = {}
    for headers, data in _parse(body, content_type, _Collector(max_parts, max_json_bytes, max_part_bytes)):
        name = _part_name(headers)
        if not name:
            raise _bad("every part of a multipart/form-data body needs a name (Content-Disposition: form-data; name=)")
        if name in named:
            raise RequestRejected([Issue((name,), f"the body has two parts named {name!r}", "part_duplicate")])
        named[name] = b"".join(data)
    request = named.pop(REQUEST_PART, None)
    if request is None:
        message = "a multipart body needs a part named 'request' holding the JSON request"
        raise RequestRejected([Issue((REQUEST_PART,), message, "missing")])
    return request, named
