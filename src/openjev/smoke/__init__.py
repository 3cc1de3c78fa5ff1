"""`openjev smoke URL`: prove that a deployment answers correctly, end to end, over HTTP.

`run_smoke(url)` first waits for the server: it sends the support-ticket example and retries
connection failures, 503 and 529 with backoff (honouring Retry-After) until the startup deadline.
Then it runs every check, each independent of the others:

- `example`: the support-ticket example (all three answer types) is well-formed and makes sense:
  the user asks for a refund (noul > 0.5) and billing handles it;
- `choice_255`: a choice with 255 options answers with every option, probabilities summing to 1;
- `choice_256_rejected`, `questions_201_rejected`: over the limits, 422;
- `score_10`: a score with 10 levels is well-formed (score = sum of i * p_i, legend unchanged);
- `sdk`: the official `typesafe-sdk` sends a zstd-compressed request and parses the answer
  (skipped, not failed, when typesafe-sdk is not installed);
- `decisions`: the example through OpenAI's Decisions API (`/v1/decisions`, model `gpt-6-luna`):
  answers in question order with their names, the same sense (parsed by the `openai` SDK's `Decision`
  where it is installed);
- `images`: where `/v1/limits` says images are accepted, a red and a blue picture asked the same noul
  question get different answers (skipped where the model reads text only);
- `auth`: with an API key, requests without it or with a wrong one get 401 (skipped without a key).

The `SmokeReport` holds the startup wait and, per check, its status, latency (of the final HTTP
attempt; wall time for the SDK), HTTP status and openjev's cache headers `x-openjev-cached-tokens`
and `x-openjev-prefix-tokens` (null when absent, never a made-up 0). `ok` is false when the server
never became ready or any check failed. It renders as JSON (`to_json`) and as text (`summary`).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

from openjev.endpoints import COMPAT_MODEL_ALIAS
from openjev.smoke.checks import CHECKS
from openjev.smoke.probe import (
    STARTUP_STATUSES,
    SUPPORT_TICKET,
    CheckFailed,
    CheckSkipped,
    Probe,
    describe_error,
    header_int,
)

__all__ = ["CHECKS", "SUPPORT_TICKET", "SmokeReport", "run_smoke"]

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
        cached_tokens=header_int(response, "x-openjev-cached-tokens") if answered else None,
        prefix_tokens=header_int(response, "x-openjev-prefix-tokens") if answered else None,
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
