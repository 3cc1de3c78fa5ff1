"""A protocol-faithful fake SGLang 0.5.19 server for tests (never used by production code).

It follows SGLang's native HTTP API as the 0.5.19 wheel serves it: `/generate` with the Python
server's `meta_info` (or the Rust frontend's reduced one), `/health` (503 while the Python frontend
starts, whose `/generate` meanwhile waits; always 200 on the Rust one), `/model_info` (a local
`model_path` whose `config.json` holds the vocabulary size), `/v1/models` with `max_model_len`,
`/server_info` (the Python frontend's carries the scheduler's `max_req_input_len`), `/abort_request`
(exact in-flight rid only), `/flush_cache`, `--api-key` on every route but `/health` (Python), and a
radix-cache simulation for `cached_tokens`. A client that closes its connection aborts its request:
at once on the Rust frontend, within SGLang's 4 s wait timeout on the Python one.

What 0.5.19 refuses or crashes on is decided by `rules.judge`, in every state; a crash, a refusal
and any breach of openjev's readout contract are recorded in `violations` (the fixtures assert the
list is empty). Every `/generate` body and the fake's verdict go to `payloads` for the check with
SGLang's own classes. Label logprobs are deterministic functions of the prompt ids; in vision mode
(`vision=True`, `vision.py`) of the prompt as the model sees it, its images included.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from openjev.backends.supervised import free_port
from tests.fake_sglang import payloads
from tests.fake_sglang.aborts import work_until_aborted
from tests.fake_sglang.batch import GATEWAY_REFUSAL, is_batch, requests_of, rid_breach, split_batch
from tests.fake_sglang.generation import (
    BOX_TEXT,
    box_generation,
    generated_ids,
    generation_meta,
    generation_violation,
    is_generation,
)
from tests.fake_sglang.hidden import add_state, judge_call
from tests.fake_sglang.info_routes import InfoRoutes
from tests.fake_sglang.meta import readout, readout_answer
from tests.fake_sglang.model import Logprobs, hashed_logprobs, local_model_dir
from tests.fake_sglang.ranks import RankCaches
from tests.fake_sglang.rules import Outcome, contract_violation, error_response, judge_all, max_req_input_len
from tests.fake_sglang.scheduler import Scheduler
from tests.fake_sglang.vision import SeenPrompt, seen_prompt, vision_model_dir

# SGLang's TokenizerManager looks at a waiting request's connection this often (SGLANG_REQUEST_STATE_WAIT_TIMEOUT).
PYTHON_DISCONNECT_CHECK = 4.0
RUST_DISCONNECT_CHECK = 0.02


@dataclass
class FakeSGLang(InfoRoutes):
    """Behaviour switches are plain attributes; tests change them between requests."""

    rust_frontend: bool = False
    starting_seconds: float = 0.0
    page_size: int = 1
    context_length: int = 32768
    #: The KV pool size; SGLang's length limit is `min(context_length - 1, this - 1) - 5`.
    max_total_num_tokens: int = 1_000_000
    generate_delay: float = 0.0
    #: 1-based index of the first /generate call that `generate_delay` applies to.
    delay_from_call: int = 1
    #: Seconds a /generate call works, given its requests (or `generate_delay` if longer); None: none.
    delay_for: Callable[[list[dict[str, Any]]], float] | None = None
    #: 1-based index of a /generate call that fails with `fail_status` (None: none fails).
    fail_on_call: int | None = None
    fail_status: int = 500
    logprobs: Logprobs = hashed_logprobs
    #: False: /v1/models and /server_info say nothing of lengths (an SGLang other than 0.5.19).
    report_limits: bool = True
    #: Rewrites each /generate answer before it is sent (a broken backend); None: sent as built.
    mangle: Callable[[dict[str, Any]], Any] | None = None
    api_key: str | None = None
    served_model_name: str = "Qwen/Qwen3.6-35B-A3B"
    tokenizer_path: str | None = None
    model_path: str = field(default_factory=local_model_dir)
    revision: str | None = None
    #: Generations end with their first stop id after this many ids (None: they run to max_new_tokens).
    generation_length: int | None = None
    #: What a box question's generation writes (`generation.py`, box mode; needs `tokenizer_path`).
    box_text: str = BOX_TEXT
    #: A file each violation is also appended to, for fakes in another process (the stand-in).
    violation_log: str | None = None
    #: Data-parallel ranks (`--dp-size`), each with its own radix cache (`ranks.py`).
    dp_size: int = 1
    #: A file each answered call is appended to as a JSON line (rid, input_ids, the rank asked for, the
    #: rank that served it, cached_tokens), for fakes in another process (the stand-in).
    call_log: str | None = None
    #: A model that sees (`vision.py`): its own model files, `has_image_understanding`, `image_data`.
    vision: bool = False
    #: How long one scheduler step takes (`scheduler.py`): requests arriving meanwhile share the next one.
    step_seconds: float = 0.0
    #: False: a `/generate` in the list form is a 422, as sgl-model-gateway 0.3.2 answers it (`batch.py`).
    list_form: bool = True
    #: `--return-hidden-states-mode` ("last", "full") or None: not launched with it (`hidden.py`).
    hidden_states_mode: str | None = None

    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Bytes of each `/generate` body as received, in order (what openjev sent over the wire).
    generate_bytes: list[int] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    #: In-flight rids whose client closed the connection (also listed in `aborted`).
    disconnected: list[str] = field(default_factory=list)
    #: The cached_tokens each rid was answered with (also in Rust mode, which does not send it).
    cached_tokens: dict[str, int] = field(default_factory=dict)
    #: The data-parallel rank that served each rid.
    served_by: dict[str, int] = field(default_factory=dict)
    max_in_flight: int = 0
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)

    def finish_starting(self) -> None:
        """End the "starting" phase now, whatever `starting_seconds` said."""
        self._ready_at = 0.0

    def __post_init__(self) -> None:
        if self.vision and self.model_path == local_model_dir():
            self.model_path = vision_model_dir()
        self._in_flight: dict[str, asyncio.Event] = {}
        self._caches = RankCaches(self.dp_size)
        self.scheduler = Scheduler(self._caches, self._violate, self.step_seconds)
        self._calls = self.health_calls = 0  # `/generate` calls, `/health` probes
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
    def generate_posts(self) -> list[dict[str, Any]]:  # each as posted (a batch in its list form)
        return [entry for entry in self.requests if entry["path"] == "/generate"]

    @property
    def generate_calls(self) -> list[dict[str, Any]]:
        """Each request of every `/generate` in its single form (a batch's as SGLang splits it), in order."""
        return [{"path": "/generate", "body": one} for post in self.generate_posts for one in requests_of(post["body"])]

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeSGLang:
        self._ready_at = time.monotonic() + self.starting_seconds
        self._server = uvicorn.Server(self.uvicorn_config())
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake SGLang server did not start")
            time.sleep(0.01)
        return self

    def uvicorn_config(self) -> uvicorn.Config:
        # A large backlog: bursts of connections must not be refused before the fake sees them.
        return uvicorn.Config(
            self._app(), host=self.host, port=self.port, log_level="warning", lifespan="off", backlog=4096
        )

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
            Route("/server_info", self._server_info, methods=["GET"]),
        ]
        if not self.rust_frontend:
            routes += [
                Route("/get_server_info", self._server_info, methods=["GET"]),
                Route("/abort_request", self._abort, methods=["POST"]),
                Route("/flush_cache", self._flush, methods=["GET", "POST"]),
            ]
        return Starlette(routes=routes)

    async def _read(self, request: Request) -> dict[str, Any] | Response:
        """The JSON body, recorded with its path; or the 401 a keyed SGLang answers instead."""
        denied = self._unauthorized(request)
        if denied:
            return denied
        raw = await request.body()
        body = json.loads(raw)
        self.requests.append({"path": request.url.path, "body": body})
        if request.url.path == "/generate":
            self.generate_bytes.append(len(raw))
        return body

    def _violate(self, message: str) -> None:
        self.violations.append(message)
        if self.violation_log:
            with open(self.violation_log, "a", encoding="utf-8") as log:
                log.write(message + "\n")

    def _answer(self, outcome: Outcome) -> Response:
        self._violate(f"{'crash' if outcome.crash else outcome.status}: {outcome.message}")
        if outcome.crash:  # the real server is dead: no answer at all (here, a 500 the test will see)
            return PlainTextResponse(f"fake SGLang crashed: {outcome.message}", status_code=500)
        if outcome.plain_text:
            return PlainTextResponse("Internal Server Error", status_code=outcome.status)
        return error_response(outcome.message, outcome.status)

    async def _generate(self, request: Request) -> Response:
        body = await self._read(request)
        if isinstance(body, Response):
            return body
        self._calls += 1
        call_number = self._calls
        limits = {"context_length": self.context_length, "max_total_num_tokens": self.max_total_num_tokens}
        batched = is_batch(body)
        if batched and not self.list_form:
            return PlainTextResponse(GATEWAY_REFUSAL, status_code=422)
        items = split_batch(body) if batched else [body]
        facts = {"rust": self.rust_frontend, "dp_size": self.dp_size, **limits}
        mode = self.hidden_states_mode
        outcome = items if isinstance(items, Outcome) else judge_all(items, **facts) or judge_call(body, items, mode)
        expect = "ok" if outcome is None else "crash" if outcome.crash else "refused"
        payloads.record_payload(body, expect=expect, hidden_states_mode=mode, **facts)
        if outcome is not None:
            return self._answer(outcome)
        seen = [self._seen(item) for item in items]  # type: ignore[union-attr]
        breach = rid_breach(body, items) or next((found for found in seen if isinstance(found, str)), None)  # type: ignore[arg-type]
        if breach is not None:
            self._violate(breach)
            return error_response(breach, 500)
        if not self.rust_frontend:  # 0.5.19's Rust frontend has no starting state at all
            while self._starting():  # noqa: ASYNC110 - the Python frontend queues work until it is up
                await asyncio.sleep(0.02)
        rids = [item["rid"] for item in items]  # type: ignore[index]
        if any(rid in self._in_flight for rid in rids):
            return self._answer(Outcome(f"Duplicate request ID detected: {rids}"))
        answers = await self._run(request, items, seen, call_number)  # type: ignore[arg-type]
        if isinstance(answers, Response):
            return answers
        return JSONResponse(answers if batched else answers[0])

    def _seen(self, item: dict[str, Any]) -> SeenPrompt | str:  # as the model sees it, or the breach it is
        breach = contract_violation(item) or (generation_violation(item) if is_generation(item) else None)
        limit = max_req_input_len(self.context_length, self.max_total_num_tokens)
        return breach or seen_prompt(item, self.vision, limit)

    async def _run(
        self, request: Request, items: list[dict[str, Any]], seen: list[SeenPrompt], call_number: int
    ) -> list[Any] | Response:
        """Every request of one call in one scheduler step (the ones not aborted first); their answers."""
        events = {item["rid"]: asyncio.Event() for item in items}
        self._in_flight.update(events)
        self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
        try:
            if self.fail_on_call == call_number:
                await asyncio.sleep(0.05)
                return error_response("injected failure", self.fail_status)
            aborted = await self._work(request, events, items, call_number)
            for item in items:
                self.served_by[item["rid"]] = self._caches.route(item)
            live = [index for index, item in enumerate(items) if item["rid"] not in aborted]
            steps = [(self.served_by[items[i]["rid"]], list(seen[i].key), items[i]) for i in live]
            cached = dict(zip(live, await self.scheduler.prefill(steps, self.page_size), strict=True)) if live else {}
            answers = []
            for index, (item, prompt) in enumerate(zip(items, seen, strict=True)):
                answer = self._result(item["rid"], item, prompt, index not in cached, cached.get(index, 0))
                if is_generation(item) and index in cached:
                    self._generated(item["rid"], answer, item)
                answers.append(self.mangle(answer) if self.mangle else answer)
            return answers
        finally:
            for rid in events:
                self._in_flight.pop(rid, None)

    async def _work(
        self, request: Request, events: dict[str, asyncio.Event], items: list[dict[str, Any]], call_number: int
    ) -> set[str]:
        """Work as long as the call takes; the rids aborted first (by /abort_request, or all by a closed connection)."""
        slow = self.delay_for(items) if self.delay_for else 0.0
        if not (seconds := max(self.generate_delay * (call_number >= self.delay_from_call), slow)):
            return set()
        check = RUST_DISCONNECT_CHECK if self.rust_frontend else PYTHON_DISCONNECT_CHECK
        aborted, gone = await work_until_aborted(request, events, seconds, check)
        self.disconnected, self.aborted = self.disconnected + gone, self.aborted + gone
        return aborted

    def _generated(self, rid: str, answer: dict[str, Any], body: dict[str, Any]) -> None:
        """Turn a readout answer into a generation's (`generation.py`); prompt and output enter the
        serving rank's cache, as a finished request enters SGLang's radix cache."""
        params, prompt, asked = body["sampling_params"], body["input_ids"], body["token_ids_logprob"]
        stops = params["stop_token_ids"]
        output = generated_ids(prompt, params["max_new_tokens"], stops, self.generation_length)
        read = None
        if "regex" in params:
            box = box_generation(self.tokenizer_path or "", self.box_text, params, asked)
            if isinstance(box, str):
                self._violate(box)
            else:
                output, read = box
        answer["output_ids"] = output
        answer["meta_info"] |= generation_meta(output, stops, asked, read)
        self._caches.remember(self.served_by[rid], prompt + output)

    def _result(self, rid: str, body: dict[str, Any], seen: SeenPrompt, aborted: bool, cached: int) -> dict[str, Any]:
        # The prompt as the model sees it (vision.py): its images' positions keyed by their bytes.
        prompt, ids = seen.key, body["token_ids_logprob"]
        rank = self.served_by[rid]
        self.cached_tokens[rid] = cached
        if self.call_log:
            call = {"rid": rid, "input_ids": prompt, "routed_dp_rank": body.get("routed_dp_rank"), "rank": rank,
                    "cached_tokens": cached}  # fmt: skip
            with open(self.call_log, "a", encoding="utf-8") as log:
                log.write(json.dumps(call) + "\n")
        found = readout(rid, ids, self.logprobs(prompt, ids), aborted, (len(seen.expanded), cached),
                        rank if self.dp_size > 1 else None)  # fmt: skip
        return add_state(readout_answer(found, rust=self.rust_frontend), body, prompt)
