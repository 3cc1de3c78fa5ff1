"""A protocol-faithful fake SGLang server for tests (never used by production code).

It follows SGLang's native HTTP API: `/generate` single and batch forms with the
Python server's `meta_info` (or the Rust frontend's reduced one), 400 `{"error": {"message"}}` for
bad input, `/health` 503 while starting then 200, `/model_info`, `/v1/models` with `max_model_len`,
`/abort_request` (200 with an empty body; the aborted request resolves with finish_reason abort),
`/flush_cache`, and a radix-cache simulation for `cached_tokens` (longest previously seen prefix,
capped at prompt length - 1, aligned down to the page size).

It fails loudly wherever a real SGLang would crash or silently misbehave: a request without a
non-empty `token_ids_logprob` (mixed-batch crash, #34719), `logprob_start_len >= 0` (disables
prefix caching), or an unknown `sampling_params` key (a 500 in SGLang). Each violation is recorded
in `violations`; the test fixture asserts the list is empty.

Label logprobs are deterministic functions of the prompt ids, so equal prompts give equal answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from openjev.backends.supervised import free_port

VOCAB_SIZE = 151936
FLOAT32_MIN = -3.4028234663852886e38
KNOWN_SAMPLING_PARAMS = {
    "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "min_new_tokens", "n", "stop", "stop_token_ids", "ignore_eos", "skip_special_tokens",
    "no_stop_trim", "logit_bias", "sampling_seed", "custom_params", "json_schema", "regex", "ebnf", "structural_tag",
}  # fmt: skip

# The simulated radix cache keeps this many recent prompts (bounded, like real cache eviction).
_REMEMBERED_PROMPTS = 64

Logprobs = Callable[[Sequence[int], Sequence[int]], list[float]]


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status_code=status)


def hashed_logprobs(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
    """Deterministic pseudo log-probabilities in [-11, -1], a function of the prompt and the id."""
    digest = hashlib.blake2b(repr(tuple(input_ids)).encode(), digest_size=8).digest()
    seed = int.from_bytes(digest, "little")
    return [-1.0 - ((seed ^ (token_id * 2654435761)) % 10007) / 1000.0 for token_id in token_ids]


@dataclass
class FakeSGLang:
    """Behaviour switches are plain attributes; tests change them between requests."""

    rust_frontend: bool = False
    starting_seconds: float = 0.0
    page_size: int = 1
    context_length: int = 32768
    generate_delay: float = 0.0
    #: 1-based index of the first /generate call that `generate_delay` applies to.
    delay_from_call: int = 1
    #: 1-based index of a /generate call that fails with `fail_status` (None: none fails).
    fail_on_call: int | None = None
    fail_status: int = 500
    logprobs: Logprobs = hashed_logprobs
    api_key: str | None = None
    served_model_name: str = "Qwen/Qwen3.6-35B-A3B"
    tokenizer_path: str | None = None

    requests: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    #: The cached_tokens each rid was answered with (also in Rust mode, which does not send it).
    cached_tokens: dict[str, int] = field(default_factory=dict)
    max_in_flight: int = 0
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)

    def finish_starting(self) -> None:
        """End the "starting" phase now, whatever `starting_seconds` said."""
        self._ready_at = 0.0

    def __post_init__(self) -> None:
        self._in_flight: dict[str, asyncio.Event] = {}
        self._seen_prompts: list[tuple[int, ...]] = []
        self._calls = 0
        self._ready_at = 0.0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def generate_calls(self) -> list[dict[str, Any]]:
        return [entry for entry in self.requests if entry["path"] == "/generate"]

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeSGLang:
        self._ready_at = time.monotonic() + self.starting_seconds
        config = uvicorn.Config(self._app(), host=self.host, port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake SGLang server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeSGLang:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- HTTP -------------------------------------------------------------------------------------

    def _app(self) -> Starlette:
        routes = [
            Route("/generate", self._generate, methods=["POST", "PUT"]),
            Route("/health", self._health, methods=["GET"]),
            Route("/health_generate", self._health, methods=["GET"]),
            Route("/model_info", self._model_info, methods=["GET"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]
        if not self.rust_frontend:
            routes += [
                Route("/abort_request", self._abort, methods=["POST"]),
                Route("/flush_cache", self._flush, methods=["GET", "POST"]),
            ]
        return Starlette(routes=routes)

    def _unauthorized(self, request: Request) -> Response | None:
        # The Rust frontend does not enforce --api-key.
        expected = f"Bearer {self.api_key}"
        if self.api_key and not self.rust_frontend and request.headers.get("authorization") != expected:
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    async def _health(self, request: Request) -> Response:
        if time.monotonic() < self._ready_at and not self.rust_frontend:
            return Response(status_code=503)
        return Response(status_code=200)

    async def _model_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": "nvidia/Qwen3.6-35B-A3B-NVFP4",
                "served_model_name": self.served_model_name,
                "tokenizer_path": self.tokenizer_path,
                "is_generation": True,
            }
        )

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.served_model_name,
                        "parent": None,
                        "max_model_len": self.context_length,
                    }
                ],
            }
        )

    async def _abort(self, request: Request) -> Response:
        denied = self._unauthorized(request)
        if denied:
            return denied
        body = await request.json()
        self.requests.append({"path": "/abort_request", "body": body})
        rid = body.get("rid") or ""
        for live_rid, event in list(self._in_flight.items()):
            if body.get("abort_all") or (rid and live_rid.startswith(rid)):
                self.aborted.append(live_rid)
                event.set()
        return Response(status_code=200)

    async def _flush(self, request: Request) -> Response:
        if self._in_flight:
            return PlainTextResponse("Cache not flushed because there are pending requests.", status_code=400)
        self._seen_prompts.clear()
        return PlainTextResponse("Cache flushed.\n")

    def _violation(self, message: str) -> Response:
        self.violations.append(message)
        # What a real server does: the scheduler dies or the request 500s.
        return JSONResponse({"object": "error", "message": message, "code": 500}, status_code=500)

    def _refuse(self, body: dict[str, Any]) -> Response | None:
        """The answer a real SGLang gives to a request it refuses (or a violation); None when it is fine."""
        params = body.get("sampling_params") or {}
        unknown = set(params) - KNOWN_SAMPLING_PARAMS
        if unknown:
            return self._violation(f"unknown sampling_params keys {sorted(unknown)} (TypeError -> 500 in SGLang)")
        if not body.get("token_ids_logprob"):
            return self._violation("a request without token_ids_logprob can crash the scheduler (#34719)")
        if body.get("logprob_start_len", -1) != -1:
            return self._violation("logprob_start_len >= 0 computes prompt logprobs and caps prefix caching")
        if not body.get("return_logprob"):
            return self._violation("return_logprob must be true with token_ids_logprob")
        input_ids = body.get("input_ids")
        if not input_ids or ("text" in body) == ("input_ids" in body):
            return _error("Either text or input_ids should be provided.")
        prompts = input_ids if isinstance(input_ids[0], list) else [input_ids]
        for prompt in prompts:
            if not prompt:
                return _error("input_ids cannot be empty.")
            if any(not isinstance(t, int) or not 0 <= t < VOCAB_SIZE for t in prompt):
                return _error("input_ids contain out-of-vocabulary ids")
            if len(prompt) + params.get("max_new_tokens", 128) > self.context_length:
                return _error(
                    f"The input ({len(prompt)} tokens) is longer than the model's context "
                    f"length ({self.context_length} tokens)."
                )
        token_ids = body["token_ids_logprob"]
        for ids in token_ids if isinstance(token_ids[0], list) else [token_ids]:
            if any(not isinstance(t, int) or not 0 <= t < VOCAB_SIZE for t in ids):
                return _error(f"token_ids_logprob contains out-of-vocabulary token id {ids}")
        return None

    async def _generate(self, request: Request) -> Response:
        denied = self._unauthorized(request)
        if denied:
            return denied
        body = await request.json()
        self.requests.append({"path": "/generate", "body": body})
        self._calls += 1
        call_number = self._calls
        if time.monotonic() < self._ready_at:
            return JSONResponse({"error": {"message": "server is starting"}}, status_code=503)

        refused = self._refuse(body)
        if refused is not None:
            return refused
        input_ids = body["input_ids"]
        batch = isinstance(input_ids[0], list)
        prompts: list[list[int]] = input_ids if batch else [input_ids]
        rids = body.get("rid")
        if batch:
            base = rids or uuid.uuid4().hex
            rid_list = rids if isinstance(rids, list) else [f"{base}_{i}" for i in range(len(prompts))]
        else:
            rid_list = [rids or uuid.uuid4().hex]
        token_ids = body["token_ids_logprob"]
        ids_lists = token_ids if isinstance(token_ids[0], list) else [token_ids] * len(prompts)
        for rid in rid_list:
            if rid in self._in_flight:
                return _error(f"Duplicate request ID detected: {rid}")

        events = {rid: asyncio.Event() for rid in rid_list}
        self._in_flight.update(events)
        self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
        try:
            if self.fail_on_call == call_number:
                await asyncio.sleep(0.05)
                return JSONResponse({"error": {"message": "injected failure"}}, status_code=self.fail_status)
            aborted = False
            if self.generate_delay and call_number >= self.delay_from_call:
                waits = [asyncio.create_task(event.wait()) for event in events.values()]
                done, pending = await asyncio.wait(waits, timeout=self.generate_delay)
                for task in pending:
                    task.cancel()
                aborted = bool(done)
            results = [
                self._result(rid, prompt, ids, aborted)
                for rid, prompt, ids in zip(rid_list, prompts, ids_lists, strict=True)
            ]
        finally:
            for rid in rid_list:
                self._in_flight.pop(rid, None)
        return JSONResponse(results if batch else results[0])

    def _cached_tokens(self, prompt: list[int]) -> int:
        best = 0
        for seen in self._seen_prompts:
            common = 0
            for a, b in zip(seen, prompt, strict=False):
                if a != b:
                    break
                common += 1
            best = max(best, common)
        self._seen_prompts.append(tuple(prompt))
        del self._seen_prompts[:-_REMEMBERED_PROMPTS]
        best = min(best, len(prompt) - 1)
        return best - best % self.page_size

    def _result(self, rid: str, prompt: list[int], ids: list[int], aborted: bool) -> dict[str, Any]:
        values = self.logprobs(prompt, ids)
        position = [[FLOAT32_MIN if math.isinf(v) else v, t, None] for v, t in zip(values, ids, strict=True)]
        best = max(range(len(ids)), key=lambda i: values[i])
        sampled, sampled_logprob = ids[best], position[best][0]
        finish: dict[str, Any] = (
            {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
            if aborted
            else {"type": "length", "length": 1}
        )
        cached = self.cached_tokens[rid] = self._cached_tokens(prompt)
        if self.rust_frontend:
            meta: dict[str, Any] = {
                "completion_tokens": 1,
                "e2e_latency": 0.001,
                "finish_reason": finish,
                "id": rid,
                "input_token_logprobs": [],
                "output_token_ids_logprobs": [position],
                "output_token_logprobs": [[sampled_logprob, sampled, None]],
                "prompt_tokens": len(prompt),
            }
            return {"meta_info": meta, "output_ids": [sampled], "text": ""}
        meta = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": len(prompt),
            "weight_version": "default",
            "num_retractions": 0,
            "input_token_logprobs": [],
            "output_token_logprobs": [[sampled_logprob, sampled, None]],
            "output_token_logprobs_length": 1,
            "input_token_ids_logprobs": [],
            "output_token_ids_logprobs": [position],
            "reasoning_tokens": 0,
            "completion_tokens": 1,
            "cached_tokens": cached,
            "cached_tokens_details": {"device": cached, "host": 0} if cached else None,
            "dp_rank": None,
            "e2e_latency": 0.001,
            "response_sent_to_client_ts": time.time(),
        }
        return {"text": "", "output_ids": [sampled], "meta_info": meta}


def main() -> None:
    """Run the fake standalone: `python -m tests.fake_sglang --port N [--rust-frontend]`."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rust-frontend", action="store_true")
    args = parser.parse_args()
    fake = FakeSGLang(port=args.port, rust_frontend=args.rust_frontend)
    config = uvicorn.Config(fake._app(), host=fake.host, port=fake.port, log_level="warning", lifespan="off")
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
