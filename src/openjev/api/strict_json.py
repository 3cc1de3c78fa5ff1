"""Standard JSON only: a body that is not JSON text the parser can take is a 422 `json_invalid`.

That covers syntax errors (FastAPI's own answer), lone UTF-16 surrogates (`"\ud800"` escapes no UTF-8
text can hold: echoed back in an answer, one was a 500), NaN and Infinity, numbers that overflow (floats past
±1.8e308, integers over Python's 4,300 digits), bytes that are not UTF-8, and nesting deeper than the
parser can recurse (about 1,000 levels). Python's parser accepts NaN and Infinity, and a non-finite
number in, say, a score level would otherwise come back in `legend`, which JSON cannot carry; the
others raise errors FastAPI would answer with a bare 400. Routes use `StrictJSONRoute`.

`loads_if_same(data)` is `loads_strict(data)` by orjson (which parses a long chat three times faster;
with the checks below, `loads_if_same` takes about 60% of `loads_strict`'s time), where orjson is sure
to give the same value, and None where it might not or the JSON is refused: orjson
reads an integer outside [-2**63, 2**64 - 1] as a float (so any run of 20 digits, and a minus with 19,
is left to `loads_strict`), and reads nesting up to 1,024 deep where `loads_strict` stops at about 1,000 (so a
value orjson cannot write back, nested over 255, is left too). Both read floats correctly rounded,
keep a repeated key's last value at its first place, and refuse what is not UTF-8 (orjson also lone
surrogates, which `loads_strict` refuses too: None).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute


def _refuse_constant(token: str) -> Any:
    raise json.JSONDecodeError(f"{token} is not valid JSON", token, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} overflows a JSON number", text, 0)
    return value


#: A `\u` escape of a UTF-16 surrogate at a given place: a high one with its low one, or either alone.
_SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def lone_surrogate_at(data: bytes) -> int | None:
    """Where the first escape of a lone surrogate starts, if any. Each `\\u` is found by `bytes.find` and
    is an escape where an even run of backslashes precedes it; only there is the pattern matched. A regex
    searched over the whole body would hold the GIL throughout (90 ms for 1.9 MB of text with a few
    backslashes), this holds it a step at a time."""
    start = data.find(b"\\u")
    while start != -1:
        escape = _SURROGATE_ESCAPE.match(data, start) if _backslashes_before(data, start) % 2 == 0 else None
        if escape is not None and escape.end() - start == 6:
            return start
        start = data.find(b"\\u", escape.end() if escape is not None else start + 1)
    return None


def _backslashes_before(data: bytes, end: int) -> int:
    """The run of backslashes just before `end` (runs before different `\\u` never overlap: linear)."""
    start = end
    while start > 0 and data[start - 1] == 0x5C:
        start -= 1
    return end - start


def loads_strict(data: bytes | str, *, lone_surrogates: bool = False) -> Any:
    """`data` as JSON, refusing all the module names; `lone_surrogates`: read them (the caller names
    the fields that hold them)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not lone_surrogates and b"\\u" in raw and (position := lone_surrogate_at(raw)) is not None:
        raise json.JSONDecodeError("a lone UTF-16 surrogate escape is not Unicode text", "", position)
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError:
        raise
    except UnicodeDecodeError as error:
        raise json.JSONDecodeError("the body is not UTF-8 text", "", error.start) from error
    except ValueError as error:  # an integer over the digit limit
        raise json.JSONDecodeError("a number has more digits than the parser takes (4,300)", "", 0) from error
    except RecursionError as error:
        raise json.JSONDecodeError("the JSON is nested too deeply", "", 0) from error


#: Every digit to "0", "-" kept, every other byte to " ": a run of 20 digits becomes `_LONG_DIGIT_RUN`
#: and a minus before 19 digits `_LONG_NEGATIVE_RUN` (bytes searches, 7x faster than a regular
#: expression on a long chat).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else byte if byte == 0x2D else 0x20 for byte in range(256))
_LONG_DIGIT_RUN = b"0" * 20
_LONG_NEGATIVE_RUN = b"-" + b"0" * 19


def loads_if_same(data: bytes) -> Any | None:
    """orjson reads integers exactly in [-2**63, 2**64 - 1] and as floats outside it: every integer of
    at most 18 digits, and of 19 digits without a minus (< 10**19 < 2**64), is inside, so a body with
    a run of 20 digits, or a minus and 19, is left to `loads_strict` (floats are read correctly rounded
    by both, whatever their digits)."""
    digits = data.translate(_DIGITS_AS_ZEROS)
    if _LONG_DIGIT_RUN in digits or _LONG_NEGATIVE_RUN in digits:
        return None
    try:
        value = orjson.loads(data)
        orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    return value


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_strict(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
