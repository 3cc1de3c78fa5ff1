"""The smoke test's HTTP side: a `Probe` that posts Jev requests, and reading its answers strictly."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import httpx

from openjev.examples import support_ticket

SYSTEM_ONE = "/v1/systemone"
DECISIONS = "/v1/decisions"
SUM_TOLERANCE = 1e-3
BACKOFF_FIRST, BACKOFF_FACTOR, BACKOFF_MAX = 0.5, 1.5, 10.0
#: /v1/decisions answers overload as OpenAI does, 429.
STARTUP_STATUSES = frozenset({429, 503, 529})

#: The request every deployment must get right.
SUPPORT_TICKET: dict[str, Any] = support_ticket()


class CheckFailed(Exception):
    """The server answered, but not as the contract requires."""


class CheckSkipped(Exception):
    """The check cannot run here (no key given, SDK not installed); it neither passes nor fails."""


class Probe:
    """One HTTP client for the whole run; every request retries startup answers until its deadline."""

    def __init__(self, url: str, api_key: str | None, model: str, request_timeout: float, retry_window: float) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.request_timeout = request_timeout
        self.retry_window = retry_window
        self.client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(request_timeout, connect=10.0))
        self.last: httpx.Response | None = None
        self.attempts = 0

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def post(
        self,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        deadline: float | None = None,
        path: str = SYSTEM_ONE,
    ) -> httpx.Response:
        """POST /v1/systemone (or `path`); connection failures, 503, 529 and 429 are retried until `deadline`."""
        deadline = time.monotonic() + self.retry_window if deadline is None else deadline
        delay = BACKOFF_FIRST
        while True:
            self.attempts += 1
            try:
                response = self.client.post(
                    path, json=body, headers=self.auth_headers() if headers is None else dict(headers)
                )
            except httpx.TransportError:
                if time.monotonic() + delay > deadline:
                    raise
                pause = delay
            else:
                self.last = response
                if response.status_code not in STARTUP_STATUSES or time.monotonic() + delay > deadline:
                    return response
                pause = max(delay, retry_after_seconds(response) or 0.0)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            delay = min(delay * BACKOFF_FACTOR, BACKOFF_MAX)

    def request(self, questions: Mapping[str, Any], state: Any = "A short note.") -> dict[str, Any]:
        return {"model": self.model, "state": state, "questions": questions}

    def close(self) -> None:
        self.client.close()


def retry_after_seconds(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


def header_int(response: httpx.Response | None, name: str) -> int | None:
    if response is None or name not in response.headers:
        return None
    try:
        return int(response.headers[name])
    except ValueError:
        return None


def error_detail(response: httpx.Response) -> Any:
    """The `detail` of an error body, or None when the body is not the contract's JSON."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("detail") if isinstance(body, dict) else None


def _is_json_object(response: httpx.Response) -> bool:
    try:
        return isinstance(response.json(), dict)
    except ValueError:
        return False


def describe_error(response: httpx.Response) -> str:
    """Status and the server's own words, in any of the contract's error shapes."""
    detail = error_detail(response)
    error = response.json().get("error") if detail is None and _is_json_object(response) else None
    if isinstance(error, dict):  # OpenAI's envelope (/v1/decisions)
        return f"HTTP {response.status_code} {error.get('type')} at {error.get('param')}: {error.get('message')}"
    if isinstance(detail, dict):
        return f"HTTP {response.status_code} {detail.get('error_type')}: {detail.get('message')}"
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return f"HTTP {response.status_code}: {detail[0].get('msg')} at {detail[0].get('loc')}"
    return f"HTTP {response.status_code}: {response.text[:300] or response.reason_phrase}"


# -- answer checks ----------------------------------------------------------------------------------


def answers_of(response: httpx.Response, questions: Mapping[str, Any]) -> dict[str, Any]:
    if response.status_code != 200:
        raise CheckFailed(f"expected 200, got {describe_error(response)}")
    body = response.json()
    answers = body.get("answers")
    if not isinstance(answers, dict) or set(answers) != set(questions):
        raise CheckFailed(f"answers for {sorted(answers or {})}, asked {sorted(questions)}")
    for question_id, question in questions.items():
        if answers[question_id].get("type") != question["type"]:
            raise CheckFailed(
                f"{question_id}: answer type {answers[question_id].get('type')!r}, asked {question['type']!r}"
            )
    usage = body.get("usage") or {}
    if not all(type(usage.get(name)) is int for name in ("input_tokens", "output_tokens")):
        raise CheckFailed(f"usage must hold integer token counts, got {usage}")
    return answers


def read_unit(name: str, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or not 0 <= value <= 1:
        raise CheckFailed(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def read_distribution(name: str, probabilities: Any, keys: list[str]) -> dict[str, float]:
    if not isinstance(probabilities, dict) or set(probabilities) != set(keys):
        got = sorted(probabilities) if isinstance(probabilities, dict) else probabilities
        raise CheckFailed(f"{name}: probabilities must be keyed by the {len(keys)} options, got {str(got)[:200]}")
    values = {key: read_unit(f"{name} probability of {key!r}", probabilities[key]) for key in keys}
    total = math.fsum(values.values())
    if abs(total - 1) > SUM_TOLERANCE:
        raise CheckFailed(f"{name}: probabilities sum to {total:.6f}, not 1")
    return values


def read_choice(name: str, answer: Mapping[str, Any], options: list[str]) -> dict[str, float]:
    probabilities = read_distribution(name, answer.get("probabilities"), options)
    if answer.get("choice") not in options or probabilities[answer["choice"]] < max(probabilities.values()):
        raise CheckFailed(f"{name}: choice {answer.get('choice')!r} is not the most probable option")
    read_unit(f"{name} confidence", answer.get("confidence"))
    return probabilities


def read_score(name: str, answer: Mapping[str, Any], levels: list[Any]) -> float:
    keys = [str(index) for index in range(len(levels))]
    probabilities = read_distribution(name, answer.get("probabilities"), keys)
    if answer.get("legend") != dict(zip(keys, levels, strict=True)):
        raise CheckFailed(f"{name}: legend {answer.get('legend')!r} does not repeat the levels")
    expected = math.fsum(int(key) * p for key, p in probabilities.items())
    score = answer.get("score")
    if not isinstance(score, int | float) or abs(score - expected) > SUM_TOLERANCE * len(levels):
        raise CheckFailed(f"{name}: score {score!r} is not sum(i * p_i) = {expected:.4f}")
    read_unit(f"{name} confidence", answer.get("confidence"))
    return float(score)
