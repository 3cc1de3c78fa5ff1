"""Prometheus metrics, exposed at GET /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

REQUESTS = Counter(
    "openjev_requests", "Finished /v1/systemone requests, by HTTP status.", ["status"], registry=REGISTRY
)
REQUEST_SECONDS = Histogram(
    "openjev_request_seconds",
    "Wall time of successful /v1/systemone requests.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
IN_FLIGHT = Gauge("openjev_in_flight_requests", "Evaluations in progress.", registry=REGISTRY)
QUESTIONS = Counter("openjev_questions", "Questions answered.", ["type"], registry=REGISTRY)
INPUT_TOKENS = Counter("openjev_input_tokens", "Prompt tokens submitted to the backend.", registry=REGISTRY)
CACHED_TOKENS = Counter(
    "openjev_cached_tokens", "Prompt tokens the backend reported as reused from its cache.", registry=REGISTRY
)
# Data-parallel SGLang (OPENJEV_DATA_PARALLEL_SIZE > 1): per rank, as `affinity.RankRouter` assigns them.
RANK_IN_FLIGHT = Gauge(
    "openjev_rank_in_flight_calls",
    "Backend calls of in-progress requests pinned to each data-parallel rank.",
    ["rank"],
    registry=REGISTRY,
)
RANK_PROMPT_TOKENS = Counter(
    "openjev_rank_prompt_tokens",
    "Prompt tokens of finished calls, per data-parallel rank.",
    ["rank"],
    registry=REGISTRY,
)
RANK_CACHED_TOKENS = Counter(
    "openjev_rank_cached_tokens",
    "Prompt tokens each data-parallel rank reported as reused from its radix cache.",
    ["rank"],
    registry=REGISTRY,
)
