"""`multipart/form-data` bodies as the official SDK sends image assets (RFC 7578), parsed with python-multipart.

Contract: `split_body(body, content_type, max_json_bytes, max_parts)` returns the JSON of the part
named `request` and every other part's bytes by its name (the assets' `part` values claim them). A
body that does not parse, a part without a name, two parts of one name, or no `request` part is a 400
or 422 naming the part; a `request` part over `max_json_bytes` (OPENJEV_MAX_BODY_BYTES, the JSON
body's own cap) is a 413; a body of more than `max_parts` parts (the request and one per image) is a
422 as soon as the parser meets the part past it, so a body of many tiny parts costs no more than a
few. Part headers are bounded by python-multipart (8 headers of 4 KiB at most); the whole body was
bounded by `BodyDecoder` already, and is parsed from memory, once (on the event loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from openjev.api.errors import HttpError
from openjev.errors import Issue, RequestRejected

#: The part that holds the request's JSON body.
REQUEST_PART = "request"


class _TooManyParts(Exception):
    pass


@dataclass
class _Collector:
    """python-multipart's callbacks: each part's headers and bytes, in order, `max_parts` at most."""

    max_parts: int
    parts: list[tuple[dict[bytes, bytes], bytearray]] = field(default_factory=list)
    _field: bytearray = field(default_factory=bytearray)
    _value: bytearray = field(default_factory=bytearray)

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_part_data": lambda data, start, end: self.parts[-1][1].extend(data[start:end]),
            "on_header_field": lambda data, start, end: self._field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
            "on_header_end": self._header_end,
        }

    def _part_begin(self) -> None:
        if len(self.parts) == self.max_parts:
            raise _TooManyParts
        self.parts.append(({}, bytearray()))

    def _header_end(self) -> None:
        self.parts[-1][0][bytes(self._field).lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()


def _bad(message: str) -> HttpError:
    return HttpError(400, "invalid_body", message)


def _parse(body: bytes, content_type: str, max_parts: int) -> list[tuple[dict[bytes, bytes], bytearray]]:
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise _bad("a multipart/form-data body needs a boundary in its Content-Type")
    collector = _Collector(max_parts)
    parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as error:
        raise _bad(f"the multipart/form-data body does not parse: {error}") from error
    except _TooManyParts:
        message = (
            f"a multipart body holds at most {max_parts} parts: the request and one per image (OPENJEV_MAX_IMAGES)"
        )
        raise RequestRejected([Issue(("assets",), message, "too_long", {"max_length": max_parts})]) from None
    return collector.parts


def split_body(body: bytes, content_type: str, max_json_bytes: int, max_parts: int) -> tuple[bytes, dict[str, bytes]]:
    """(the `request` part's JSON, the other parts by name); the module's contract."""
    named: dict[str, bytes] = {}
    for headers, data in _parse(body, content_type, max_parts):
        _, disposition = parse_options_header(headers.get(b"content-disposition"))
        name = disposition.get(b"name", b"").decode("utf-8", "replace")
        if not name:
            raise _bad("every part of a multipart/form-data body needs a name (Content-Disposition: form-data; name=)")
        if name in named:
            raise RequestRejected([Issue((name,), f"the body has two parts named {name!r}", "part_duplicate")])
        named[name] = bytes(data)
    request = named.pop(REQUEST_PART, None)
    if request is None:
        message = "a multipart body needs a part named 'request' holding the JSON request"
        raise RequestRejected([Issue((REQUEST_PART,), message, "missing")])
    if len(request) > max_json_bytes:
        message = f"the 'request' part is over the limit of {max_json_bytes} bytes (OPENJEV_MAX_BODY_BYTES)"
        raise HttpError(413, "request_too_large", message)
    return request, named
