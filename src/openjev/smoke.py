"""`openjev smoke URL`: prove that a deployment answers correctly, end to end, over HTTP.

`run_smoke(url)` first waits for the server: it sends the support-ticket example and retries
connection failures, 503 and 529 with backoff (honouring Retry-After) until the startup deadline.
Then it runs every check, each independent of the others:

- `example`: the support-ticket example (all three answer types) is well-formed and makes sense:
  the user asks for a refund (noul > 0.5) and billing handles it;
- `choice_255`: a choice with 255 options answers with every option, probabilities summing to 1;
- `choice_256_rejected`, `questions_65_rejected`: over the limits, 422;
- `score_10`: a score with 10 levels is well-formed (score = sum of i * p_i, legend unchanged);
- `sdk`: the official `typesafe-sdk` sends a zstd-compressed request and parses the answer
  (skipped, not failed, when typesafe-sdk is not installed);
- `auth`: with an API key, requests without it or with a wrong one get 401 (skipped without a key).

The `SmokeReport` holds the startup wait and, per check, its status, latency (of the final HTTP
attempt; wall time for the SDK), HTTP status and openjev's cache headers `x-openjev-cached-tokens`
and `x-openjev-prefix-tokens` (null when absent, never a made-up 0). `ok` is false when the server
never became ready or any check failed. It renders as JSON (`to_json`) and as text (`summary`).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

from openjev.config import COMPAT_MODEL_ALIAS
from openjev.examples import support_ticket

SYSTEM_ONE = "/v1/systemone"
SUM_TOLERANCE = 1e-3
BACKOFF_FIRST, BACKOFF_FACTOR, BACKOFF_MAX = 0.5, 1.5, 10.0
STARTUP_STATUSES = frozenset({503, 529})

#: The request every deployment must get right.
SUPPORT_TICKET: dict[str, Any] = support_ticket()

Status = Literal["passed", "failed", "skipped"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "skipped")


@dataclass
class CheckResult:
    name: str
    status: Status
    message: str
    latency_seconds: float | None = None
    http_status: int | None = None
    cached_tokens: int | None = None
    prefix_tokens: int | None = None


@dataclass
class Startup:
    ready: bool
    wait_seconds: float
    attempts: int
    http_status: int | None
    error: str | None = None


@dataclass
class SmokeReport:
    url: str
    started_at: str
    startup: Startup
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.startup.ready and all(check.status != "failed" for check in self.checks)

    def counts(self) -> dict[str, int]:
        return {status: sum(check.status == status for check in self.checks) for status in STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self), "counts": self.counts()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def summary(self) -> str:
        counts = self.counts()
        lines = [
            f"openjev smoke {self.url}: {'PASS' if self.ok else 'FAIL'} "
            f"({counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped)",
            f"  startup: {'ready' if self.startup.ready else 'NOT READY'} after {self.startup.wait_seconds:.1f}s, "
            f"{self.startup.attempts} attempt(s)" + (f": {self.startup.error}" if self.startup.error else ""),
        ]
        for check in self.checks:
            latency = "-" if check.latency_seconds is None else f"{check.latency_seconds * 1000:.0f}ms"
            cache = f"cached={_or_null(check.cached_tokens)} prefix={_or_null(check.prefix_tokens)}"
            lines.append(f"  {check.status.upper():7} {check.name:22} {latency:>8}  {cache:28} {check.message}")
        return "\n".join(lines)


def _or_null(value: int | None) -> str:
    return "null" if value is None else str(value)


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
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None, deadline: float | None = None
    ) -> httpx.Response:
        """POST /v1/systemone; connection failures, 503 and 529 are retried until `deadline`."""
        deadline = time.monotonic() + self.retry_window if deadline is None else deadline
        delay = BACKOFF_FIRST
        while True:
            self.attempts += 1
            try:
                response = self.client.post(
                    SYSTEM_ONE, json=body, headers=self.auth_headers() if headers is None else dict(headers)
                )
            except httpx.TransportError:
                if time.monotonic() + delay > deadline:
                    raise
                pause = delay
            else:
                self.last = response
                if response.status_code not in STARTUP_STATUSES or time.monotonic() + delay > deadline:
                    return response
                pause = max(delay, _retry_after(response) or 0.0)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            delay = min(delay * BACKOFF_FACTOR, BACKOFF_MAX)

    def request(self, questions: Mapping[str, Any], state: Any = "A short note.") -> dict[str, Any]:
        return {"model": self.model, "state": state, "questions": questions}

    def close(self) -> None:
        self.client.close()


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


def _header_int(response: httpx.Response | None, name: str) -> int | None:
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


def describe_error(response: httpx.Response) -> str:
    """Status and the server's own words, in any of the contract's error shapes."""
    detail = error_detail(response)
    if isinstance(detail, dict):
        return f"HTTP {response.status_code} {detail.get('error_type')}: {detail.get('message')}"
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return f"HTTP {response.status_code}: {detail[0].get('msg')} at {detail[0].get('loc')}"
    return f"HTTP {response.status_code}: {response.text[:300] or response.reason_phrase}"


# -- answer checks ----------------------------------------------------------------------------------


def _answers(response: httpx.Response, questions: Mapping[str, Any]) -> dict[str, Any]:
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


def _unit(name: str, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or not 0 <= value <= 1:
        raise CheckFailed(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _distribution(name: str, probabilities: Any, keys: list[str]) -> dict[str, float]:
    if not isinstance(probabilities, dict) or set(probabilities) != set(keys):
        got = sorted(probabilities) if isinstance(probabilities, dict) else probabilities
        raise CheckFailed(f"{name}: probabilities must be keyed by the {len(keys)} options, got {str(got)[:200]}")
    values = {key: _unit(f"{name} probability of {key!r}", probabilities[key]) for key in keys}
    total = math.fsum(values.values())
    if abs(total - 1) > SUM_TOLERANCE:
        raise CheckFailed(f"{name}: probabilities sum to {total:.6f}, not 1")
    return values


def _choice(name: str, answer: Mapping[str, Any], options: list[str]) -> dict[str, float]:
    probabilities = _distribution(name, answer.get("probabilities"), options)
    if answer.get("choice") not in options or probabilities[answer["choice"]] < max(probabilities.values()):
        raise CheckFailed(f"{name}: choice {answer.get('choice')!r} is not the most probable option")
    _unit(f"{name} confidence", answer.get("confidence"))
    return probabilities


def _score(name: str, answer: Mapping[str, Any], levels: list[Any]) -> float:
    keys = [str(index) for index in range(len(levels))]
    probabilities = _distribution(name, answer.get("probabilities"), keys)
    if answer.get("legend") != dict(zip(keys, levels, strict=True)):
        raise CheckFailed(f"{name}: legend {answer.get('legend')!r} does not repeat the levels")
    expected = math.fsum(int(key) * p for key, p in probabilities.items())
    score = answer.get("score")
    if not isinstance(score, int | float) or abs(score - expected) > SUM_TOLERANCE * len(levels):
        raise CheckFailed(f"{name}: score {score!r} is not sum(i * p_i) = {expected:.4f}")
    _unit(f"{name} confidence", answer.get("confidence"))
    return float(score)


def _ticket_sanity(refund: float, department: str) -> str:
    if refund <= 0.5:
        raise CheckFailed(f"semantic sanity: refund = {refund:.3f}, but the user plainly asks for a refund")
    if department != "billing":
        raise CheckFailed(f"semantic sanity: department = {department!r}, but a double charge is for billing")
    return f"refund {refund:.3f}, department billing"


def check_example(probe: Probe) -> str:
    body = {**SUPPORT_TICKET, "model": probe.model}
    answers = _answers(probe.post(body), body["questions"])
    questions = body["questions"]
    refund = _unit("refund", answers["refund"].get("noul"))
    _choice("department", answers["department"], list(questions["department"]["criteria"]))
    urgency = _score("urgency", answers["urgency"], questions["urgency"]["criteria"])
    return f"{_ticket_sanity(refund, answers['department']['choice'])}, urgency {urgency:.2f}"


def _topics(count: int) -> dict[str, str]:
    return {f"topic-{index:03d}": f"Questions about product line number {index}" for index in range(count)}


def check_choice_255(probe: Probe) -> str:
    options = _topics(255)
    questions = {"topic": {"type": "choice", "instructions": "Which product line is this about?", "criteria": options}}
    answers = _answers(probe.post(probe.request(questions, "My product line 42 device broke.")), questions)
    _choice("topic", answers["topic"], list(options))
    return f"255 options answered, choice {answers['topic']['choice']}"


def _expect_422(response: httpx.Response, what: str) -> str:
    if response.status_code != 422:
        raise CheckFailed(f"{what} must be rejected with 422, got {describe_error(response)}")
    detail = error_detail(response)
    if not isinstance(detail, list) or not detail:
        raise CheckFailed(f"a 422 must carry a list of validation errors, got {detail!r}")
    return f"rejected: {detail[0].get('msg')}"


def check_choice_256_rejected(probe: Probe) -> str:
    questions = {"topic": {"type": "choice", "criteria": _topics(256)}}
    return _expect_422(probe.post(probe.request(questions)), "a choice with 256 options")


def check_questions_65_rejected(probe: Probe) -> str:
    questions = {f"q{index}": {"type": "noul", "instructions": f"Is {index} even?"} for index in range(65)}
    return _expect_422(probe.post(probe.request(questions)), "a request with 65 questions")


SCORE_LEVELS = [f"{level}: {'very ' * (level // 3)}{'calm' if level < 5 else 'angry'}" for level in range(10)]


def check_score_10(probe: Probe) -> str:
    questions = {"anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": SCORE_LEVELS}}
    answers = _answers(probe.post(probe.request(questions, "This is the third time the app lost my work!")), questions)
    return f"score {_score('anger', answers['anger'], SCORE_LEVELS):.2f} over 10 levels"


def check_sdk(probe: Probe) -> str:
    try:
        import typesafe_sdk
    except ImportError as error:
        raise CheckSkipped("typesafe-sdk is not installed (pip install 'typesafe-sdk[zstd]')") from error
    # Options make the body larger than 1 KiB, so the SDK compresses it.
    questions = {
        **copy.deepcopy(SUPPORT_TICKET["questions"]),
        "topic": {"type": "choice", "instructions": "Which product line?", "criteria": _topics(26)},
    }
    try:
        client = typesafe_sdk.TypeSafeClient(
            base_url=probe.url, api_key=probe.api_key or "unused", model=probe.model,
            compression="zstd", timeout=probe.request_timeout,
        )  # fmt: skip
        compression = "zstd"
    except typesafe_sdk.TypeSafeError:  # zstd unavailable on this Python: still check parsing
        client = typesafe_sdk.TypeSafeClient(
            base_url=probe.url, api_key=probe.api_key or "unused", model=probe.model,
            compression=False, timeout=probe.request_timeout,
        )  # fmt: skip
        compression = "uncompressed (zstd unavailable here)"
    with client:
        try:
            result = client.system_one(state=SUPPORT_TICKET["state"], questions=questions)
        except typesafe_sdk.TypeSafeError as error:
            raise CheckFailed(f"the SDK failed: {type(error).__name__}: {error}") from error
    if not isinstance(result, typesafe_sdk.SystemOneResponse):
        raise CheckFailed(f"the SDK returned {type(result).__name__}")
    refund = _unit("refund", result.nouls["refund"].noul)
    topic = result.choices["topic"].choice
    if topic not in questions["topic"]["criteria"]:
        raise CheckFailed(f"the SDK parsed choice {topic!r}, not one of the options")
    _unit("urgency confidence", result.scores["urgency"].confidence)
    return f"parsed by typesafe-sdk {typesafe_sdk.__version__} ({compression}); " + _ticket_sanity(
        refund, result.choices["department"].choice
    )


def check_auth(probe: Probe) -> str:
    if not probe.api_key:
        raise CheckSkipped("no API key given")
    body = {**SUPPORT_TICKET, "model": probe.model}
    for what, headers in (("no key", {}), ("a wrong key", {"Authorization": "Bearer wrong-" + probe.api_key})):
        response = probe.post(body, headers=headers)
        detail = error_detail(response)
        if (
            response.status_code != 401
            or not isinstance(detail, dict)
            or detail.get("error_type") != "authentication_error"
        ):
            raise CheckFailed(f"a request with {what} must get 401 authentication_error: {describe_error(response)}")
    return "401 without a key and with a wrong key"


CHECKS: list[tuple[str, Callable[[Probe], str]]] = [
    ("example", check_example),
    ("choice_255", check_choice_255),
    ("choice_256_rejected", check_choice_256_rejected),
    ("questions_65_rejected", check_questions_65_rejected),
    ("score_10", check_score_10),
    ("sdk", check_sdk),
    ("auth", check_auth),
]


def _run_check(probe: Probe, name: str, check: Callable[[Probe], str]) -> CheckResult:
    probe.last = None
    started = time.perf_counter()
    status: Status = "failed"
    try:
        message, status = check(probe), "passed"
    except CheckSkipped as skipped:
        return CheckResult(name, "skipped", str(skipped))
    except CheckFailed as failure:
        message = str(failure)
    except httpx.HTTPError as error:
        message = f"no answer: {type(error).__name__}: {error}"
    except Exception as error:  # a broken answer (bad JSON, wrong shapes) must fail the check, not the run
        message = f"{type(error).__name__}: {error}"
    response = probe.last
    answered = response is not None and response.status_code == 200
    return CheckResult(
        name,
        status,
        message,
        latency_seconds=response.elapsed.total_seconds() if response is not None else time.perf_counter() - started,
        http_status=response.status_code if response is not None else None,
        cached_tokens=_header_int(response, "x-openjev-cached-tokens") if answered else None,
        prefix_tokens=_header_int(response, "x-openjev-prefix-tokens") if answered else None,
    )


def wait_until_ready(probe: Probe, startup_deadline: float) -> Startup:
    """Send the example until the answer is not a startup answer (503, 529, no connection)."""
    started = time.monotonic()
    try:
        response = probe.post({**SUPPORT_TICKET, "model": probe.model}, deadline=started + startup_deadline)
    except httpx.HTTPError as error:
        return Startup(
            False, time.monotonic() - started, probe.attempts, None,
            f"no answer within {startup_deadline:g}s: {type(error).__name__}: {error}",
        )  # fmt: skip
    waited = time.monotonic() - started
    if response.status_code in STARTUP_STATUSES:
        return Startup(
            False, waited, probe.attempts, response.status_code,
            f"still not ready after {startup_deadline:g}s: {describe_error(response)}",
        )  # fmt: skip
    return Startup(True, waited, probe.attempts, response.status_code)


def run_smoke(
    url: str,
    *,
    api_key: str | None = None,
    startup_deadline: float = 1800.0,
    model: str = COMPAT_MODEL_ALIAS,
    request_timeout: float = 300.0,
    retry_window: float = 60.0,
) -> SmokeReport:
    """Wait for `url` to start, then run every check; see the module docstring."""
    probe = Probe(url, api_key, model, request_timeout, retry_window)
    try:
        report = SmokeReport(probe.url, dt.datetime.now(dt.UTC).isoformat(), wait_until_ready(probe, startup_deadline))
        if report.startup.ready:
            report.checks = [_run_check(probe, name, check) for name, check in CHECKS]
        return report
    finally:
        probe.close()
