"""SGLang as a backend: `/generate` calls over pooled keep-alive HTTP.

- A readout is one `/generate`; readouts that go out together (`readout_batch`, an evaluation's
  branches) are one `/generate` in SGLang's list form, which reaches its scheduler at once. Their
  bodies and SGLang's batch semantics: `sglang_readouts.py`. A server that answers the list form
  with 422 (SGLang never does; sgl-model-gateway 0.3.2 does: its `rid` is one string) gets that batch
  and the next ones as one call per readout, the list form tried again after 2, 4, ... 256 batches
  (`readout_batch`).
- The label logprobs are `meta_info.output_token_ids_logprobs[0]`, one `[logprob, id, text]` per
  requested id, in request order (`sglang_answers.py`).
- A cancelled call closes its connection (which aborts it on the Rust frontend) and posts
  `/abort_request` with each of its rids (the Python frontend's way); neither may leave work
  running. A batch that fails is aborted the same way: SGLang leaves its other readouts running.

Readiness: `/health` must answer 200, then one real generation must succeed (the Rust frontend's
`/health` has no "starting" state, so a 200 alone does not prove the warm-up is done), then the
server's limits must be known: no readout may reach what SGLang 0.5.19 refuses or crashes on
(`sglang_facts.py` reads them).

- Length: its scheduler refuses a prompt of `max_req_input_len` tokens or more
  (`managers/utils.py:219`, `scheduler.py:2835`), `max_req_input_len = min(context_len - 1,
  max_total_num_tokens - 1) - 5` (`tp_worker.py:543-556`); on the Python frontend that refusal of a
  logprob request kills the server. `context_length` reports `max_req_input_len` (the largest
  prompt + its one output token), read from `/server_info` or derived from `/v1/models`.
- Vocabulary: 0.5.19 never checks `input_ids` against the vocabulary (`tokenizer_manager.py:1162`
  checks only `token_ids_logprob`); one bad id kills the Python frontend. Every readout's ids are
  checked here against the model's `vocab_size` (its `config.json`, as SGLang reads it), unless the
  caller vouches for them (`ReadoutCall.ids_in_vocabulary`, when its tokenizer fits the model).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from openjev.backends.base import (
    Backend,
    BackendError,
    BackendHealth,
    BackendTimeout,
    BackendUnavailable,
    Generation,
    GenerationCall,
    LabelLogprobs,
    ReadoutCall,
)
from openjev.backends.sglang_answers import error_message, parse_label_logprobs
from openjev.backends.sglang_facts import positive_int, read_server_facts
from openjev.backends.sglang_generation import generation_payload, parse_generation
from openjev.backends.sglang_images import Base64Images, ImageTransport, image_transport
from openjev.backends.sglang_readouts import ListFormRefused, batch_payload, generate_payload, parse_batch
from openjev.backends.sglang_vocab import check_vocabulary
from openjev.config import Settings
from openjev.prompting.vision import VisionSpec
from openjev.request.images import ImageInput

log = logging.getLogger("openjev.sglang")

_ABORT_TIMEOUT = 2.0
_PROBE_INTERVAL = 0.5
_CONNECTIONS_PER_POOL = 8
_JSON_HEADERS = {"content-type": "application/json"}
_CONTROL_CONNECTIONS = 4
#: Batches sent one call per readout at most between two tries of a refused list form.
LIST_FORM_RETRY_CAP = 256


def client_options(settings: Settings, *, co_located: bool = False) -> dict[str, Any]:
    """The `SGLangBackend` keyword arguments that come from settings (connected, or supervised: `co_located`)."""
    return {
        "images": image_transport(settings, co_located=co_located),
        "api_key": settings.backend_api_key.get_secret_value() if settings.backend_api_key else None,
        "request_timeout": settings.request_timeout,
        "startup_timeout": settings.backend_startup_timeout,
        "max_connections": settings.max_concurrent_branches,
        "vocab_size": settings.backend_vocab_size,
        "data_parallel_size": settings.data_parallel_size,
        "tokenizer": settings.tokenizer,
    }


class SGLangBackend(Backend):
    kind = "sglang"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        request_timeout: float = 120.0,
        startup_timeout: float = 1800.0,
        max_connections: int = 64,
        vocab_size: int | None = None,
        data_parallel_size: int | None = None,
        tokenizer: Path | None = None,
        images: ImageTransport | None = None,
    ) -> None:
        """`tokenizer`: openjev's own tokenizer directory (OPENJEV_TOKENIZER), read before any hub look-up."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.startup_timeout = startup_timeout
        # httpcore walks every pooled connection on each request, so one pool of 64 costs O(64) per
        # call; readouts are spread over small pools instead (measured: see benchmarks/sidecar_overhead.py).
        pool_size = min(max_connections, _CONNECTIONS_PER_POOL)
        self._pools = [
            httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=httpx.Timeout(request_timeout, connect=10.0),
                limits=httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size),
            )
            for _ in range(-(-max_connections // pool_size))
        ]
        self._next_pool = itertools.cycle(self._pools)
        # Health probes, aborts and start-up reads on their own connections: a busy SGLang must not look
        # dead because a probe queued behind readouts, and an abort must never wait for a free slot.
        self._control = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(10.0),
            limits=httpx.Limits(max_connections=_CONTROL_CONNECTIONS, max_keepalive_connections=_CONTROL_CONNECTIONS),
        )
        self.model_info: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self._context_length: int | None = None
        self._vocab_size: int | None = None
        self._configured_vocab_size = vocab_size
        self._configured_dp_size = data_parallel_size
        self._dp_size = data_parallel_size or 1
        self._vision: VisionSpec | None = None
        #: How images reach SGLang (`sglang_images.py`); base64 unless the settings say otherwise.
        self.images = images or Base64Images(Settings.model_fields["encoded_image_cache_bytes"].default)
        self._tokenizer = tokenizer
        #: Refusals of the list form in a row (`ListFormRefused`), and batches still to send one call per readout.
        self._list_form_refusals = 0
        self._single_batches = 0

    # -- readout ----------------------------------------------------------------------------------

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        self._check_vocabulary([call])
        body = functools.partial(generate_payload, call)
        return parse_label_logprobs(await self._post(body, [call.rid], call.images), call)

    async def readout_batch(self, calls: Sequence[ReadoutCall]) -> list[LabelLogprobs]:
        """One `/generate` for all (`sglang_readouts.py`); a single readout stays a plain call. After the
        server refused the list form `n` times in a row, the next min(2^n, LIST_FORM_RETRY_CAP) batches go
        out one call per readout, then the list form is tried again (a success resets `n`): a refusal
        costs one round trip in which no readout runs, and a server that takes the list form again
        (a gateway replaced, a transient 422) gets batches again."""
        if len(calls) == 1:
            return await super().readout_batch(calls)
        if self._single_batches:
            self._single_batches -= 1
            return await super().readout_batch(calls)
        self._check_vocabulary(calls)
        body = functools.partial(batch_payload, calls)
        images = [image for call in calls for image in call.images]
        try:
            answers = parse_batch(await self._post(body, [call.rid for call in calls], images), calls)
        except ListFormRefused as refused:
            self._list_form_refusals += 1
            self._single_batches = min(2**self._list_form_refusals, LIST_FORM_RETRY_CAP)
            log.warning("%s: the next %d batches go out one /generate per readout", refused, self._single_batches)
            return await super().readout_batch(calls)
        self._list_form_refusals = 0
        return answers

    async def generate(self, call: GenerationCall) -> Generation:
        if self._vocab_size is not None:
            check_vocabulary(call, self._vocab_size)
        body = functools.partial(generation_payload, call)
        return parse_generation(await self._post(body, [call.rid], call.images), call)

    def _check_vocabulary(self, calls: Sequence[ReadoutCall]) -> None:
        if self._vocab_size is not None:
            for call in calls:
                if not call.ids_in_vocabulary:
                    check_vocabulary(call, self._vocab_size)

    async def _post(
        self, body: Callable[[list[str] | None], dict[str, Any]], rids: list[str], images: Sequence[ImageInput]
    ) -> Any:
        """POST the `/generate` body that `body(image_data)` builds for `rids`; the decoded answer, or the
        BackendError its failure means. A call's images are held (their files stay) until it is answered."""
        if not images:
            # orjson: a 24k-id payload encodes in about 1 ms instead of about 20 ms with the json module.
            return await self._send(orjson.dumps(body(None)), rids)
        with self.images.held(images):
            # Encoding or writing images and a body of megabytes: off the event loop.
            content = await asyncio.to_thread(lambda: orjson.dumps(body(self.images.entries(images))))
            return await self._send(content, rids)

    async def _send(self, content: bytes, rids: list[str]) -> Any:
        try:
            response = await next(self._next_pool).post("/generate", content=content, headers=_JSON_HEADERS)
        except asyncio.CancelledError:
            await self._abort(rids)
            raise
        except httpx.TimeoutException as error:
            await self._abort(rids)
            raise BackendTimeout(f"SGLang did not answer in time ({type(error).__name__})") from error
        except httpx.TransportError as error:
            raise BackendUnavailable(f"SGLang is unreachable at {self.base_url}: {error!r}") from error
        if response.status_code != 200 and len(rids) > 1:
            await self._abort(rids)  # one readout's failure leaves the batch's others running in SGLang
        if response.status_code == 422 and len(rids) > 1:
            raise ListFormRefused(f"{self.base_url} refuses /generate's list form: {error_message(response)}")
        if response.status_code == 503:
            raise BackendUnavailable(f"SGLang is not accepting work: {error_message(response)}")
        if response.status_code != 200:
            raise BackendError(f"SGLang answered {response.status_code}: {error_message(response)}")
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise BackendError("SGLang answered with a body that is not JSON") from error

    async def _abort(self, rids: list[str]) -> None:
        await asyncio.gather(*(self._abort_one(rid) for rid in rids))

    async def _abort_one(self, rid: str) -> None:
        # The connection of the cancelled call is closed already (the Rust frontend's abort); this is
        # the Python frontend's. The Rust frontend has no such route (404), a dead server cannot be
        # reached; neither may delay the cancellation, but a failure is logged, never silent.
        try:
            response = await self._control.post("/abort_request", json={"rid": rid}, timeout=_ABORT_TIMEOUT)
        except Exception as error:
            log.warning("could not abort SGLang request %s: %s", rid, type(error).__name__)
            return
        if response.status_code not in (200, 404):
            log.warning("SGLang answered %d to the abort of %s", response.status_code, rid)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def data_parallel_size(self) -> int:
        return self._dp_size

    @property
    def prefix_cache_tokens(self) -> int | None:
        # The scheduler's KV pool, which its radix cache fills (the Python frontend's /server_info).
        pool = self.server_info.get("max_total_num_tokens")
        return pool if positive_int(pool) else None

    @property
    def vocab_size(self) -> int | None:
        return self._vocab_size

    @property
    def vision(self) -> VisionSpec | None:
        return self._vision

    @property
    def tokenizer_dir(self) -> Path | None:
        path = self.model_info.get("tokenizer_path")
        if isinstance(path, str) and Path(path).is_dir():
            return Path(path)
        return None

    async def start(self) -> None:
        """Wait until SGLang is really ready, then read its limits (refusing to serve without them)."""
        started = time.monotonic()
        deadline = started + self.startup_timeout
        while True:
            try:
                if await self._health_ok():
                    # One real generation proves readiness on both frontends; it carries an id list too.
                    await self.readout(ReadoutCall(uuid.uuid4().hex, [0], [0]))
                    break
            except BackendError as error:
                log.debug("SGLang not ready yet: %s", error)
            if time.monotonic() > deadline:
                raise BackendUnavailable(f"SGLang at {self.base_url} was not ready within {self.startup_timeout:g}s")
            await asyncio.sleep(_PROBE_INTERVAL)
        facts = await read_server_facts(
            self._control,
            vocab_size=self._configured_vocab_size,
            data_parallel_size=self._configured_dp_size,
            tokenizer=self._tokenizer,
        )
        self.model_info, self.server_info = facts.model_info, facts.server_info
        self._dp_size, self._context_length = facts.data_parallel_size, facts.context_length
        self._vision, self._vocab_size = facts.vision, facts.vocab_size
        log.info(
            "SGLang at %s is ready (%.1fs): prompts up to %d tokens, vocabulary of %d ids",
            self.base_url, time.monotonic() - started, self._context_length - 1, self._vocab_size,
        )  # fmt: skip

    async def _health_ok(self) -> bool:
        try:
            response = await self._control.get("/health", timeout=5.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def health(self) -> BackendHealth:
        ok = await self._health_ok()
        return BackendHealth(
            ready=ok,
            detail={
                "url": self.base_url,
                "status": "ok" if ok else "unavailable",
                "model": self.model_info.get("served_model_name"),
                "context_length": self._context_length,
                "image_transfer": self.images.kind if self._vision is not None else None,
            },
        )

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
        await self._control.aclose()
        self.images.close()
