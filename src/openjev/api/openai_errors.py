"""OpenAI's error envelope on `/v1/decisions`, whichever layer answered with the error.

Every error of that route leaves as `{"error": {"message", "type", "param", "code"}}`, the body the
`openai` SDK reads into its exception (`param`, `code`, `type`), with the status codes it maps:
- a validation failure (openjev's 422, token budgets included) is a 400 `invalid_request_error`
  whose `param` names the first offending field as OpenAI writes it (`questions[1].choices`,
  `input[0].content[2].image_url`) and whose `code` is the failure's type (`too_long`, `missing`, ...):
  a field the request may not hold is OpenAI's `unknown_parameter` ("Unknown parameter: 'images'."
  for pydantic's `extra_forbidden`), one it cannot honour `unsupported_parameter`;
  pydantic's union tags in a location (`string`, `parts`, a part's or question's `type`) are dropped;
- a token budget over is OpenAI's context overflow: code `context_length_exceeded`, its message
  opening "Input tokens exceed the configured limit of N tokens." and saying the "maximum context
  length" (the words langchain-openai and routers match), `param` naming `input` when the input is
  the problem;
- an unknown model is a 404 with `param: "model"`;
- overload (openjev's 529) is a 429 `rate_limit_error`, keeping `Retry-After` and `retry-after-ms`,
  which the SDK honours and retries;
- every other status stays (401, 408, 413, 415, 502, 503, 504, 500), its `code` the Jev `error_type`.
The request id is also sent as `x-request-id`, where the SDK looks for it (`error.request_id`).
Successful answers pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev.api.errors import LISTED_BYTES, MESSAGE_BYTES
from openjev.api.middleware import REQUEST_ID_HEADER
from openjev.errors import clipped
from openjev.prompting.budget import CONTEXT_LENGTH_EXCEEDED

#: Pydantic's names for the members of a tagged union, after a list index (`_tagged` in request/decisions.py).
UNION_TAGS = frozenset(
    {
        "user", "developer", "system", "assistant", "function_call", "function_call_output", "custom_tool_call",
        "custom_tool_call_output", "input_text", "input_image", "input_json", "output_text", "refusal",
        "predicate", "choice", "score",
    }
)  # fmt: skip
#: Names of union members wherever they stand: a string-or-parts field's, a choice value's.
MEMBER_NAMES = frozenset({"string", "parts", "str", "bool"})
TYPES = {400: "invalid_request_error", 429: "rate_limit_error"}
#: Codes whose message is OpenAI's own sentence, which names the field itself.
NAMING_CODES = frozenset({"unknown_parameter", "unsupported_parameter"})


def openai_path(loc: Sequence[str | int]) -> list[str | int]:
    """A validation location below the body without pydantic's union member names."""
    path: list[str | int] = []
    for index, part in enumerate(loc):
        after_index = index > 0 and isinstance(loc[index - 1], int)
        if isinstance(part, str) and (part in MEMBER_NAMES or "[" in part or (after_index and part in UNION_TAGS)):
            continue
        path.append(part)
    return path


def param_of(loc: Sequence[str | int]) -> str | None:
    """`["questions", 0, "choices"]` as OpenAI writes it: `questions[0].choices`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or None


def error_type(status: int) -> str:
    if status in TYPES:
        return TYPES[status]
    if status >= 500:
        return "server_error"
    return {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}.get(
        status, "invalid_request_error"
    )


def openai_error(status: int, body: Any) -> tuple[int, dict[str, Any]]:
    """The status and envelope for a Jev error body (`{"detail": [...]}` or `{"detail": {...}}`)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list) and detail:
        status = 400 if status == 422 else status
        seen: dict[str | None, str] = {}
        codes: list[str] = []
        for entry in detail:
            loc = entry.get("loc", [])
            if entry.get("type") == "json_invalid":  # its location is a byte offset, not a field
                entry = {**entry, "msg": f"the body is not valid JSON: {entry.get('ctx', {}).get('error')}"}
                loc = loc[:1]
            param = param_of(openai_path(loc[1:] if loc[:1] == ["body"] else loc))
            if param not in seen:
                code, text = entry.get("type", "invalid_value"), entry.get("msg", "invalid value")
                if code == "extra_forbidden":
                    code, text = "unknown_parameter", f"Unknown parameter: '{param}'."
                # OpenAI's own wording names the field already.
                seen[param] = text if code in NAMING_CODES or not param else f"{param}: {text}"
                codes.append(code)
        message = "; ".join(seen.values())
        first = next(iter(seen))
        if codes[0] == CONTEXT_LENGTH_EXCEEDED:
            # OpenAI's opening for an input over the model's limit, which clients match to trim and retry.
            message = f"Input tokens exceed the configured limit of {detail[0]['ctx']['limit']} tokens. {message}"
        return status, envelope(message, error_type(status), first, codes[0])
    if isinstance(detail, dict):
        code = detail.get("error_type")
        param = "model" if code == "model_not_found" else None
        status = 429 if status == 529 else status
        return status, envelope(str(detail.get("message", "")), error_type(status), param, code)
    return status, envelope(f"HTTP {status}", error_type(status), None, None)


def envelope(message: str, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
    """OpenAI's error body, its texts bounded as every error body's are (`api.errors`)."""
    param = None if param is None else clipped(param, MESSAGE_BYTES)
    return {"error": {"message": clipped(message, LISTED_BYTES), "type": kind, "param": param, "code": code}}


class OpenAIErrorEnvelope:
    """Rewrites error responses on `paths` into OpenAI's envelope (module doc)."""

    def __init__(self, app: ASGIApp, paths: frozenset[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def enveloping_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"x-request-id", value) for name, value in headers if name == REQUEST_ID_HEADER.encode()]
                message = {**message, "headers": headers}
                if message["status"] < 400:
                    await send(message)
                else:
                    start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            try:
                body = json.loads(b"".join(chunks))
            except ValueError:
                body = None
            status, payload = openai_error(start["status"], body)
            data = json.dumps(payload, ensure_ascii=False).encode()
            kept = [(n, v) for n, v in start["headers"] if n.lower() not in (b"content-length", b"content-type")]
            headers = [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": data, "more_body": False})

        await self.app(scope, receive, enveloping_send)
