"""openjev's own errors: what went wrong, in words a client may read, with no HTTP in them.

Every error a client is told about is an `OpenJevError`. Its `error_type` is the machine-readable
name on the wire and its message is safe to show (no paths, URLs or reprs). The HTTP layer maps
each class to one status in one place (`openjev.api.errors`); the core never imports a web framework.

- `RequestRejected`: the request breaks the contract or a limit; it carries `Issue`s, each naming the
  offending field below the body (shape checks, settings limits, token budgets).
- `ModelNotFound`, `NotReady`, `Overloaded`: the request is fine but cannot be served here or now.
- `clipped`: the one rule that bounds a text shown to a client (a message, a location key, an id).
- The backend family (`BackendError` and its subclasses) lives with the backends in `backends/base.py`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Bytes of JSON of a named id shown in a refusal (`shown_id`): an id is 29 characters; a client's may be anything.
SHOWN_ID = 64
#: A field's location below the request body, e.g. ("questions", "q1", "criteria").
Loc = tuple[str | int, ...]


class OpenJevError(Exception):
    """An error whose message is meant for the client."""

    error_type = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Issue:
    """One contract violation at `loc` (below the body), reported like a pydantic error."""

    loc: Loc
    msg: str
    type: str = "value_error"
    ctx: dict[str, Any] | None = None

    def as_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"loc": ("body", *self.loc), "msg": self.msg, "type": self.type}
        if self.ctx is not None:
            error["ctx"] = self.ctx
        return error


class RequestRejected(OpenJevError):
    """The request cannot be answered as sent; every issue names its field."""

    error_type = "invalid_request"

    def __init__(self, issues: Sequence[Issue]) -> None:
        super().__init__("; ".join(issue.msg for issue in issues))
        self.issues = tuple(issues)


class ModelNotFound(OpenJevError):
    error_type = "model_not_found"


class NotReady(OpenJevError):
    """openjev itself is still starting (or failed to start): nothing can be answered yet."""

    error_type = "backend_unavailable"


class Overloaded(OpenJevError):
    """Every evaluation slot is taken; the request was refused, not queued."""

    error_type = "overloaded"


def json_bytes(value: Any) -> int:
    """Bytes of `value` as a response writes it (compact JSON, UTF-8; a lone surrogate as 3 bytes)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def clipped(text: str, limit: int) -> str:
    """`text` if it takes at most `limit` bytes as JSON, else its longest start that does with the count
    of characters left out; the result takes at most `limit` bytes, so clipping twice changes nothing."""
    if len(text) <= limit and json_bytes(text) <= limit:
        return text
    room = limit - json_bytes(f"... ({len(text)} characters more)")  # the start's bytes, its quotes included
    low, high = 0, min(len(text), room)
    while low < high:  # the longest start within `room`
        middle = (low + high + 1) // 2
        low, high = (middle, high) if json_bytes(text[:middle]) <= room else (low, middle - 1)
    return f"{text[:low]}... ({len(text) - low} characters more)"


def shown_id(identifier: str) -> str:
    """A named id as a refusal shows it: quoted, clipped to SHOWN_ID bytes of JSON."""
    return repr(clipped(identifier, SHOWN_ID))
