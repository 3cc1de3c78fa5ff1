"""`multipart/form-data` bodies as the official SDK sends image assets (RFC 7578, RFC 2046 5.1).

Contract: `split_body(body, content_type, max_json_bytes, max_parts, max_part_bytes)` returns the JSON
of the part named `request` and every other part's bytes by its name (the assets' `part` values claim
them). A body that does not split, a boundary over 70 characters (RFC 2046's limit), a part without a
name, two parts of one name, or no `request` part is a 400 or 422 naming the part; a `request` part
over `max_json_bytes` (OPENJEV_MAX_BODY_BYTES, the JSON body's own cap) is a 413, any other part over
`max_part_bytes` (OPENJEV_MAX_IMAGE_BYTES) a 422 naming it; a body of more than `max_parts` parts (the
request and one per image) is a 422 as soon as the part past it is met.

The split is linear in the body, whatever it holds: each delimiter (CRLF, `--`, the boundary) is
found by `bytes.find`, in C, which passes a false start (CRLF and dashes, part of a boundary) at C
speed; a boundary inside a part, not followed by `--` or by optional padding and CRLF, is a 400
(RFC 2046 forbids it), not data to search past (python-multipart split such false delimiters byte
by byte in Python, holding the GIL: 40 MiB took 9.6 s). A part's delimiter is looked
for only within its cap, so a huge part costs no more than its cap; a part's head is at most
MAX_PART_HEAD bytes. Searches and copies go a PIECE at a time, so the GIL is never held long.
"""

from __future__ import annotations

from python_multipart.multipart import parse_options_header

from openjev.api.errors import HttpError
from openjev.errors import Issue, RequestRejected

#: The part that holds the request's JSON body.
REQUEST_PART = "request"
#: Characters of a boundary at most (RFC 2046 5.1.1).
MAX_BOUNDARY = 70
#: Bytes of a part's head (its header lines) at most.
MAX_PART_HEAD = 16 * 1024
#: Bytes searched or copied in one call: the GIL is held about a millisecond at most.
PIECE = 1 << 20
#: Bytes of transport padding (spaces and tabs) allowed after a delimiter, before its CRLF.
MAX_PADDING = 64


def _bad(message: str) -> HttpError:
    return HttpError(400, "invalid_body", message)


def _boundary(content_type: str) -> bytes:
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise _bad("a multipart/form-data body needs a boundary in its Content-Type")
    if len(boundary) > MAX_BOUNDARY:
        raise _bad(
            f"a multipart boundary has at most {MAX_BOUNDARY} characters (RFC 2046); this one has {len(boundary)}"
        )
    return boundary


def _follows(body: bytes, after: int) -> tuple[int, bool] | None:
    """Where the next part starts after a delimiter ending at `after`, and whether it was the close;
    None if what follows makes it data (neither `--` nor padding and CRLF)."""
    if body.startswith(b"--", after):
        return len(body), True
    line = body.find(b"\r\n", after, after + MAX_PADDING + 2)
    if line >= 0 and not body[after:line].strip(b" \t"):
        return line + 2, False
    return None


def _next_delimiter(body: bytes, delimiter: bytes, start: int, end: int) -> tuple[int, int, bool] | None:
    """(where the first delimiter in body[start:end] starts, where the next part starts, whether it
    closes the body); None if there is none. The boundary may not appear in a part (RFC 2046 5.1.1):
    one followed by anything but `--` or padding and CRLF is a 400, found by the same one search, made
    a PIECE at a time (windows that overlap by the delimiter) so the GIL is held a moment at a time."""
    found = -1
    for window in range(start, end, PIECE):
        if (found := body.find(delimiter, window, min(end, window + PIECE + len(delimiter)))) >= 0:
            break
    if found < 0:
        return None
    if (following := _follows(body, found + len(delimiter))) is None:
        raise _bad("the boundary appears inside a part, not followed by CRLF or '--' (RFC 2046 5.1.1)")
    return found, *following


def _copy(body: bytes, start: int, end: int) -> bytes:
    """body[start:end], sliced a PIECE at a time and joined (`bytes.join` copies without the GIL)."""
    return b"".join(body[at : min(end, at + PIECE)] for at in range(start, end, PIECE))


def _head(body: bytes, start: int) -> tuple[dict[bytes, bytes], int]:
    """A part's header lines (names lowercased) and where its content starts."""
    if body.startswith(b"\r\n", start):
        return {}, start + 2
    end = body.find(b"\r\n\r\n", start, start + MAX_PART_HEAD)
    if end < 0:
        raise _bad(f"a part's head is missing or over {MAX_PART_HEAD} bytes")
    headers: dict[bytes, bytes] = {}
    for line in body[start:end].split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon:
            raise _bad("a part's header line has no colon")
        headers[name.strip().lower()] = value.strip()
    return headers, end + 4


def _part_name(headers: dict[bytes, bytes]) -> str:
    _, disposition = parse_options_header(headers.get(b"content-disposition"))
    return disposition.get(b"name", b"").decode("utf-8", "replace")


def _too_large(name: str, limit: int) -> Exception:
    if name == REQUEST_PART:
        message = f"the 'request' part is over the limit of {limit} bytes (OPENJEV_MAX_BODY_BYTES)"
        return HttpError(413, "request_too_large", message)
    message = f"the part {name!r} is over the limit of {limit} bytes (OPENJEV_MAX_IMAGE_BYTES)"
    return RequestRejected([Issue((name,), message, "too_long", {"limit": limit})])


def _split(body: bytes, boundary: bytes, caps: tuple[int, int, int]) -> dict[str, bytes]:
    """Every part's content by name; `caps`: (parts, the request part's bytes, another part's bytes)."""
    max_parts, max_json_bytes, max_part_bytes = caps
    delimiter, named = b"\r\n--" + boundary, {}
    # The first delimiter opens the body, or ends a preamble (RFC 2046), without a CRLF of its own.
    first = _follows(body, len(delimiter) - 2) if body.startswith(delimiter[2:]) else None
    if first is None and (found := _next_delimiter(body, delimiter, 0, len(body))) is not None:
        first = found[1:]
    if first is None:
        raise _bad("the multipart/form-data body holds no boundary of its Content-Type")
    start, closed = first
    while not closed:
        if len(named) == max_parts:
            message = (
                f"a multipart body holds at most {max_parts} parts: the request and one per image (OPENJEV_MAX_IMAGES)"
            )
            raise RequestRejected([Issue(("assets",), message, "too_long", {"max_length": max_parts})])
        headers, content = _head(body, start)
        name = _part_name(headers)
        if not name:
            raise _bad("every part of a multipart/form-data body needs a name (Content-Disposition: form-data; name=)")
        if name in named:
            raise RequestRejected([Issue((name,), f"the body has two parts named {name!r}", "part_duplicate")])
        limit = max_json_bytes if name == REQUEST_PART else max_part_bytes
        window = content + limit + len(delimiter) + MAX_PADDING + 2
        if (found := _next_delimiter(body, delimiter, content, window)) is None:
            if len(body) > window:
                raise _too_large(name, limit)
            raise _bad("the multipart/form-data body ends before its closing boundary")
        end, start, closed = found
        if end - content > limit:
            raise _too_large(name, limit)
        named[name] = _copy(body, content, end)
    return named


def split_body(
    body: bytes, content_type: str, max_json_bytes: int, max_parts: int, max_part_bytes: int
) -> tuple[bytes, dict[str, bytes]]:
    """(the `request` part's JSON, the other parts by name); the module's contract."""
    named = _split(body, _boundary(content_type), (max_parts, max_json_bytes, max_part_bytes))
    request = named.pop(REQUEST_PART, None)
    if request is None:
        message = "a multipart body needs a part named 'request' holding the JSON request"
        raise RequestRejected([Issue((REQUEST_PART,), message, "missing")])
    return request, named
