"""openjev's own errors: what went wrong, in words a client may read, with no HTTP in them.

Every error a client is told about is an `OpenJevError`. Its `error_type` is the machine-readable
name on the wire and its message is safe to show (no paths, URLs or reprs). The HTTP layer maps
each class to one status in one place (`openjev.api.errors`); the core never imports a web framework.

- `RequestRejected`: the request breaks the contract or a limit; it carries `Issue`s, each naming the
  offending field below the body (shape checks, settings limits, token budgets).
- `ModelNotFound`, `NotReady`, `Overloaded`: the request is fine but cannot be served here or now.
- The backend family (`BackendError` and its subclasses) lives with the backends in `backends/base.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
