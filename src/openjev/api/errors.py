"""Errors on the wire: every openjev error class mapped to its HTTP status, in this one place.

Bodies (as TypeSafe's API and SDK expect):
- `RequestRejected` and FastAPI's own validation failures: 422
  `{"detail": [{"loc": ["body", ...], "msg", "type"}]}`, the first issues only (`listed`): at most
  MAX_LISTED_ISSUES entries within LISTED_BYTES bytes of serialized JSON, then one entry
  (`too_many_errors`) counting the rest. Every entry is bounded in one place (`bounded_entry`: each
  key of its location, its message and context values within ENTRY_BYTES bytes as JSON, where a
  control character takes 6), and every message within MESSAGE_BYTES, so no error body passes 64 KiB
  whatever the request held, in this envelope or OpenAI's (`openai_errors.py`);
- every other error: `{"detail": {"error_type", "message"}}` with the status below; 503 and 529
  carry `Retry-After` (seconds) and `retry-after-ms`.

`HttpError` is for what only exists over HTTP (authentication, bodies that do not decode, unknown
routes); everything the core raises keeps its own class and gets its status from `STATUS`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from openjev.backends.base import BackendError, BackendTimeout, BackendUnavailable
from openjev.errors import ModelNotFound, NotReady, OpenJevError, Overloaded, RequestRejected, clipped, json_bytes
from openjev.request.schema import ErrorResponse, ValidationErrorResponse, error_body

log = logging.getLogger("openjev")

QUESTION_TYPES = frozenset({"noul", "choice", "score", "box"})


class HttpError(OpenJevError):
    """An error of the HTTP layer itself, with its status and extra headers."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.headers = headers or {}


#: Status of each core error class; the most specific class in an error's MRO wins.
STATUS: dict[type[OpenJevError], int] = {
    RequestRejected: 422,
    ModelNotFound: 404,
    Overloaded: 529,
    NotReady: 503,
    BackendUnavailable: 503,
    BackendTimeout: 504,
    BackendError: 502,
}
RETRY_STATUSES = frozenset({503, 529})


def retry_after_headers(seconds: int) -> dict[str, str]:
    return {"Retry-After": str(seconds), "retry-after-ms": str(seconds * 1000)}


def status_of(error: OpenJevError) -> int:
    if isinstance(error, HttpError):
        return error.status
    return next((STATUS[cls] for cls in type(error).__mro__ if cls in STATUS), 500)


def error_response(error: OpenJevError, retry_after: int) -> JSONResponse:
    """The one way any openjev error becomes a response."""
    status = status_of(error)
    if isinstance(error, RequestRejected):
        entries = (validation_entry(issue.as_error()) for issue in error.issues)
        return JSONResponse({"detail": listed(entries, len(error.issues))}, status)
    headers = dict(error.headers) if isinstance(error, HttpError) else {}
    if status in RETRY_STATUSES:
        headers.update(retry_after_headers(retry_after))
    message = clipped(error.message, MESSAGE_BYTES)
    return JSONResponse(error_body(error.error_type, message), status, headers=headers or None)


#: Entries an error body lists at most, and bytes of serialized JSON they take in all (the first entry
#: always listed): a 213-byte zstd body of 700,000 invalid items got a 119.6 MB 400 when every one was
#: listed, and counting characters let 900 ids of control characters (6 bytes each in JSON) reach 168,846.
MAX_LISTED_ISSUES = 50
LISTED_BYTES = 48 * 1024
#: Bytes of serialized JSON one key of a location, one entry's message or one context value takes at most.
ENTRY_BYTES = 512
#: Parts of one location kept at most (a value nested 254 deep has a location as long).
MAX_LOC_PARTS = 16
#: Bytes of serialized JSON of an error's message at most (a model name of megabytes is named in one).
MESSAGE_BYTES = 4096


def bounded_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The one place an error entry is bounded: every key of its location, its message and every context
    value clipped to ENTRY_BYTES, its location to MAX_LOC_PARTS parts."""
    loc = [clipped(part, ENTRY_BYTES) if isinstance(part, str) else part for part in entry["loc"]]
    if len(loc) > MAX_LOC_PARTS:
        loc = [*loc[: MAX_LOC_PARTS - 1], f"... ({len(loc) - MAX_LOC_PARTS + 1} parts more)"]
    bounded = {**entry, "loc": loc, "msg": clipped(str(entry["msg"]), ENTRY_BYTES)}
    if entry.get("ctx"):
        bounded["ctx"] = {
            clipped(str(key), ENTRY_BYTES): value
            if isinstance(value, int | float)
            else clipped(str(value), ENTRY_BYTES)
            for key, value in entry["ctx"].items()
        }
    return bounded


def listed(entries: Iterable[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """The first of `total` entries, each bounded (`bounded_entry`), while they stay within
    MAX_LISTED_ISSUES and LISTED_BYTES (the first always), then one entry counting those left out."""
    kept: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        entry = bounded_entry(entry)
        size += json_bytes(entry)
        if kept and (len(kept) == MAX_LISTED_ISSUES or size > LISTED_BYTES):
            break
        kept.append(entry)
    if total > len(kept):
        more = total - len(kept)
        kept.append(
            {
                "loc": ["body"],
                "msg": f"{more} more issues not listed ({total} in all); the first {len(kept)} are above",
                "type": "too_many_errors",
                "ctx": {"count": total},
            }
        )
    return kept


def validation_entry(error: Any) -> dict[str, Any]:
    """A 422 entry with `loc` pointing at the field as the contract names it.

    Pydantic adds the discriminator tag after a question id (`questions.q.choice.criteria`); the
    contract's locations omit it (`questions.q.criteria`). The offending input is not echoed back:
    it can be megabytes; `listed` bounds the entry.
    """
    loc = list(error["loc"])
    if len(loc) >= 4 and loc[:2] == ["body", "questions"] and loc[3] in QUESTION_TYPES:
        del loc[3]
    entry = {"loc": loc, "msg": str(error["msg"]), "type": error["type"]}
    if error.get("ctx"):
        entry["ctx"] = error["ctx"]
    return entry


def _documented(description: str, model: type = ErrorResponse) -> dict[str, Any]:
    return {"model": model, "description": description}


#: The error answers of each route, as the OpenAPI document lists them.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _documented("OPENJEV_API_KEY is set and the Bearer key is missing or wrong (`authentication_error`)."),
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _documented("The body does not decode (`invalid_body`): bad gzip or zstd, or not JSON text."),
    **AUTH_RESPONSES,
    404: _documented("Unknown model (`model_not_found`)."),
    408: _documented("The body did not arrive within OPENJEV_BODY_READ_TIMEOUT (`request_timeout`)."),
    413: _documented("Body over the size limit, before or after decompression."),
    415: _documented("Unsupported Content-Encoding."),
    422: _documented("Validation failure, token budgets included.", ValidationErrorResponse),
    502: _documented("The backend failed."),
    503: _documented("The backend is not ready or unreachable; see Retry-After."),
    504: _documented("The backend did not answer within the request timeout."),
    529: _documented("Too many evaluations, preparations or body uploads in progress; see Retry-After."),
}
HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {503: {"description": "Not ready; see Retry-After."}}

#: What a client is told when the backend fails. The backend's own words can hold its URL, local
#: paths, exception reprs or its answer's text: they go to the log, under the request id.
BACKEND_MESSAGES: dict[type[BackendError], str] = {
    BackendUnavailable: "the backend is not reachable or not ready; retry shortly",
    BackendTimeout: "the backend did not answer within the request timeout",
    BackendError: "the backend failed to answer this request",
}


#: Characters of a backend's error text written to the log, at most.
LOGGED_TEXT = 4096


def public_backend_error(error: BackendError, request_id: str) -> BackendError:
    """The same class of error with a message that is safe to show, naming the request id."""
    message = next(BACKEND_MESSAGES[cls] for cls in type(error).__mro__ if cls in BACKEND_MESSAGES)
    return type(error)(f"{message} (request id {request_id}; details in the server log)")


_STARLETTE_TYPES = {400: "invalid_body", 404: "not_found", 405: "method_not_allowed"}
# Anything else unforeseen becomes a 500 in `RequestIdMiddleware`, where it gets the request id.


def handled_error_response(error: OpenJevError, scope: Scope, retry_after: int) -> JSONResponse:
    """The response to an error raised while answering: a backend's own words are logged under the
    request id and replaced by `public_backend_error`."""
    if isinstance(error, BackendError):
        # `/health` shares its backend probe for a second (`probe.py`): a failure makes it ask afresh.
        if (probe := getattr(getattr(scope.get("app"), "state", None), "health_probe", None)) is not None:
            probe.forget()
        request_id = scope.get("state", {}).get("request_id", "-")
        # Clipped: a backend's error text can be megabytes (an echoed body), and the log is read whole.
        log.warning(
            "backend failure (%s, request id %s): %s", error.error_type, request_id, clipped(str(error), LOGGED_TEXT)
        )
        error = public_backend_error(error, request_id)
    return error_response(error, retry_after)


def install_error_handlers(app: FastAPI, retry_after: int) -> None:
    async def openjev_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, OpenJevError)
        return handled_error_response(error, request.scope, retry_after)

    async def http_error(_: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        error_type = _STARLETTE_TYPES.get(error.status_code, "http_error")
        return error_response(
            HttpError(error.status_code, error_type, str(error.detail), getattr(error, "headers", None)), retry_after
        )

    async def invalid(_: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        errors = error.errors()
        entries = (validation_entry(entry) for entry in errors)
        return JSONResponse({"detail": listed(entries, len(errors))}, status_code=422)

    app.add_exception_handler(OpenJevError, openjev_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
