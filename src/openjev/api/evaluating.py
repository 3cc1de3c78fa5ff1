"""The one evaluation behind every answering route, and its 200 answer.

A request is checked cheapest first: model name and the request's counts, its images decoded in image
slots of their own (a short queue, then 529), admission (529 when full), preparation in a slot of its
own (529 when full; on a worker thread unless the body is small), then the backend work, cancelled (and
aborted in the backend) if the client leaves.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from fastapi.responses import Response
from starlette.types import Receive

from openjev import metrics
from openjev.affinity import caller_key
from openjev.answering.diagnostics import with_diagnostics
from openjev.answering.evaluation import Evaluation
from openjev.api.parsing import by_size
from openjev.config import Settings
from openjev.errors import RequestRejected
from openjev.prompting.budget import LONG_CONTEXT_HEADER
from openjev.request.assets import asset_sources
from openjev.request.positional_images import ImagePlaces, with_positional_images
from openjev.request.schema import SystemOneRequest
from openjev.request.validation import check_request
from openjev.service import Runtime, Service

T = TypeVar("T")
#: Where a multipart request's image parts travel in the ASGI scope (`fast_path.py` puts them there).
IMAGE_PARTS = "openjev.image_parts"


class ClientDisconnected(Exception):
    pass


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_while_connected(receive: Receive, work: Awaitable[T]) -> T:
    """Run `work` unless the client goes away first (`receive` says so once the body is read);
    either way no task outlives this call."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise ClientDisconnected
    finally:
        for pending in (task, watcher):
            pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)


def server_timing(prep: float, evaluation: Evaluation) -> str:
    return ", ".join(
        f"{name};dur={seconds * 1000:.2f}"
        for name, seconds in (
            ("prep", prep),
            ("prefill", evaluation.prefill_seconds),
            ("branches", evaluation.branches_seconds),
        )
    )


def answer_headers(evaluation: Evaluation, prep_seconds: float) -> dict[str, str]:
    """openjev's headers on a 200 answer; the metrics of a finished evaluation are counted here."""
    metrics.INPUT_TOKENS.inc(evaluation.input_tokens)
    metrics.USAGE_INPUT_TOKENS.inc(evaluation.usage.input_tokens)
    for answer in evaluation.answers.values():
        metrics.QUESTIONS.labels(answer["type"]).inc()
    headers = {
        "x-openjev-prefix-tokens": str(evaluation.prefix_tokens),
        # openjev's own work (`usage.py`): every call's prompt tokens, and the tokens read or generated.
        "x-openjev-backend-input-tokens": str(evaluation.input_tokens),
        "x-openjev-backend-output-tokens": str(evaluation.output_tokens),
        "Server-Timing": server_timing(prep_seconds, evaluation),
    }
    if evaluation.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(evaluation.cached_tokens)
        metrics.CACHED_TOKENS.inc(evaluation.cached_tokens)
    if (escalation := evaluation.escalation) is not None:
        headers["x-openjev-escalated"] = str(escalation.escalated)
        headers["x-openjev-reasoning-tokens"] = str(escalation.reasoning_tokens)
        headers["x-openjev-escalations-over-budget"] = str(escalation.over_budget)
        metrics.ESCALATIONS.inc(escalation.escalated)
        metrics.THINKING_FAILURES.inc(escalation.failed)
        metrics.REASONING_TOKENS.inc(escalation.reasoning_tokens)
        metrics.THINKING_SECONDS.inc(escalation.seconds)
    return headers


def json_response(payload: Any, headers: dict[str, str]) -> Response:
    return Response(
        json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
        media_type="application/json",
        headers=headers,
    )


@dataclass(frozen=True, slots=True)
class Answered:
    """A finished evaluation, the seconds its preparation took, and the model name it answers under."""

    evaluation: Evaluation
    prep_seconds: float
    model: str


def answer_response(answered: Answered, diagnostics: bool = False) -> Response:
    """The `/v1/systemone` 200 answer; `diagnostics`: each answer with its readout's (`x_diagnostics`)."""
    evaluation = answered.evaluation
    answers = with_diagnostics(evaluation.answers, evaluation.diagnostics) if diagnostics else evaluation.answers
    payload = {
        "model": answered.model,
        "answers": answers,
        "usage": {"input_tokens": evaluation.usage.input_tokens, "output_tokens": evaluation.usage.output_tokens},
    }
    return json_response(payload, answer_headers(evaluation, answered.prep_seconds))


def asks_long_context(headers: Mapping[str, str]) -> bool:
    """TypeSafe's long-context mode: `TypeSafe-Danger-Zone-Long-Context: true` (`prompting/budget.py`)."""
    return headers.get(LONG_CONTEXT_HEADER.lower(), "").strip().lower() == "true"


async def answer_request(
    body: SystemOneRequest,
    body_bytes: int,
    receive: Receive,
    service: Service,
    runtime: Runtime,
    parts: dict[str, bytes] | None = None,
    long_context: bool = False,
) -> Response:
    """`POST /v1/systemone` once its body is a valid request of `body_bytes` bytes (from the route,
    or from `api.fast_path`); `receive` reports a client that leaves; `parts`: a multipart body's
    image parts by name; `long_context`: the request sent the long-context header. Its `images` list
    shows before the state (`request/positional_images.py`)."""
    places = ImagePlaces()
    try:
        jev = with_positional_images(body, places)
        answered = await evaluate_request(jev, body_bytes, receive, service, runtime, parts, long_context=long_context)
    except RequestRejected as error:
        raise places.rejected(error) from None
    return Response(status_code=499) if answered is None else answer_response(answered, body.x_diagnostics)


def checked_sources(
    body: SystemOneRequest, parts: dict[str, bytes] | None, settings: Settings, runtime: Runtime
) -> dict[str, bytes]:
    """The request's image sources by key, once its model and every settings check pass."""
    runtime.check_model(body.model)
    if issues := check_request(body, settings, runtime.engine.boxes.accepted):
        raise RequestRejected(issues)
    return asset_sources(body, parts, settings, vision=runtime.engine.images.vision is not None)


async def evaluate_request(
    body: SystemOneRequest,
    body_bytes: int,
    receive: Receive,
    service: Service,
    runtime: Runtime,
    parts: dict[str, bytes] | None = None,
    *,
    long_context: bool = False,
    conversation: str | None = None,
    fit: bool = False,
    hidden: frozenset[str] = frozenset(),
) -> Answered | None:
    """The one evaluation behind every answering route, for a valid Jev request of `body_bytes` bytes;
    None when the client left first. `long_context`: the request sent the long-context header;
    `conversation`: the caller's name for its conversation, which keys the data-parallel rank in place
    of the prompt's opening; `fit`: a fit's readout, raw (no task applied) and admitted in the fit slot
    it holds, never a caller's (`Service.admit`); `hidden`: the questions whose readout as sent carries the
    hidden state (`Evaluation.hidden_states`). Images are decoded in an image slot, never on the
    event loop."""
    settings = service.settings
    # The checks walk every string (surrogates, depth, placeholders): a large request's on a worker thread.
    images = await by_size(body_bytes, functools.partial(checked_sources, body, parts, settings, runtime))
    started = time.perf_counter()
    try:
        # Images first, in slots of their own: decoding them never holds a slot a text request needs.
        decode = functools.partial(runtime.engine.images.prepare, body, images)
        safe = await run_while_connected(receive, service.prepare_images(decode)) if images else {}
        with service.admit(fit=fit):
            lookup, new_bytes = runtime.engine.look_up(body, body_bytes)
            work = functools.partial(
                runtime.engine.prepare,
                body,
                checked=True,
                lookup=lookup,
                images=safe,
                long_context=long_context,
                tasks=not fit,
                hidden=hidden,
            )
            # The images are decoded already: what is left is text, prepared inline when small.
            prepared = await service.prepare(work, inline=service.prepares_inline(new_bytes), fit=fit)
            if conversation is not None:
                prepared = replace(prepared, affinity_key=caller_key(conversation))
            prepared_at = time.perf_counter()
            evaluation = await run_while_connected(receive, runtime.engine.evaluate(prepared))
    except ClientDisconnected:
        return None
    metrics.REQUEST_SECONDS.observe(time.perf_counter() - started)
    # The thinking tier answers under its own name, so a client sees which tier answered.
    name = body.model if body.model == service.settings.think_model else runtime.served_model_name
    return Answered(evaluation, prepared_at - started, name)
