"""The routes of the other decision contracts, each answered by `/v1/systemone`'s own evaluation.

- `POST /v1/decisions`: OpenAI's Decisions API. The body is translated (`request/decisions.py`) into
  a Jev request, evaluated by `evaluating.evaluate_request` (the same checks, admission, preparation,
  readout and answering), and the answers shaped as OpenAI's `Decision` (`answering/decisions.py`).
  A rejection names OpenAI's field; `openai_errors.py` writes every error in OpenAI's envelope. The
  answer's `model` is the name the request asked for.
  `prompt_cache_key` names the conversation for the data-parallel rank.
- Both honour TypeSafe's long-context header (`TypeSafe-Danger-Zone-Long-Context: true`), as
  `/v1/systemone` does.
- `POST /api/alpha/decisions`: OpenRouter's route, the System One contract itself, whose `state`
  array may hold `image_url` and `input_image` items (`request/openrouter.py`), and whose `model` may be
  an OpenRouter slug (`~typesafe/jev-latest`, `openai/gpt-6-luna-decisions`); answers and errors as
  `/v1/systemone`'s, its `images` list too.
- `POST /api/v1/systemone`: OpenRouter's System One route (its Python SDK's `system_one.create()` posts
  there, under its server URL `.../api/v1`): the same body, answered as `/api/alpha/decisions`.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import Receive

from openjev.answering.decisions import decision_payload, decision_usage
from openjev.answering.diagnostics import with_diagnostics
from openjev.api.dependencies import AUTHORIZED, RuntimeDep, ServiceDep
from openjev.api.errors import ERROR_RESPONSES
from openjev.api.evaluating import answer_headers, answer_request, asks_long_context, evaluate_request, json_response
from openjev.api.parsing import by_size
from openjev.api.strict_json import StrictJSONRoute
from openjev.endpoints import DECISIONS_PATH, OPENROUTER_PATH, OPENROUTER_SYSTEM_ONE_PATH
from openjev.errors import RequestRejected
from openjev.request.decision_answers import DecisionResponse, OpenAIError
from openjev.request.decision_schema import DecisionRequest
from openjev.request.decisions import translate
from openjev.request.openrouter import model_of_slug, with_image_assets
from openjev.request.positional_images import ImagePlaces
from openjev.request.schema import SystemOneRequest, SystemOneResponse
from openjev.service import Runtime, Service

router = APIRouter(route_class=StrictJSONRoute)

OPENAI_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIError, "description": description}
    for status, description in {
        400: "Invalid request; `param` names the field (`questions[0].choices`).",
        401: "OPENJEV_API_KEY is set and the Bearer key is missing or wrong.",
        404: "Unknown model (`param: model`).",
        413: "Body over the size limit.",
        429: "Too many evaluations in progress; see Retry-After.",
        503: "The backend is not ready; see Retry-After.",
        502: "The backend failed.",
        504: "The backend did not answer within the request timeout.",
        # Named so FastAPI lists no 422: a validation failure here is a 400.
        "4XX": "Any other client error (408, 413, 415), in the same envelope.",
    }.items()
}


@router.post(
    DECISIONS_PATH,
    response_model=DecisionResponse,
    responses=OPENAI_ERROR_RESPONSES,
    dependencies=AUTHORIZED,
    summary="OpenAI's Decisions API: predicate, choice and score questions about an input",
)
async def decisions(body: DecisionRequest, request: Request, service: ServiceDep, runtime: RuntimeDep) -> Response:
    long_context = asks_long_context(request.headers)
    return await answer_decisions(body, len(await request.body()), request.receive, service, runtime, long_context)


async def answer_decisions(
    body: DecisionRequest, body_bytes: int, receive: Receive, service: Service, runtime: Runtime, long_context: bool
) -> Response:
    """`POST /v1/decisions` once its body is a valid request of `body_bytes` bytes (from the route, or
    from `api.fast_path`); a rejection names OpenAI's fields. A large body is translated on a worker thread."""
    translation = await by_size(body_bytes, functools.partial(translate, body))
    try:
        answered = await evaluate_request(
            translation.request,
            body_bytes,
            receive,
            service,
            runtime,
            long_context=long_context,
            conversation=body.prompt_cache_key,
        )
    except RequestRejected as error:
        raise translation.rejected(error) from None
    if answered is None:
        return Response(status_code=499)
    evaluation = answered.evaluation
    escalation = evaluation.escalation
    usage = decision_usage(evaluation.usage, escalation.reasoning_tokens if escalation is not None else 0)
    # `model` is the name asked for, as OpenAI echoes it (`gpt-6-luna`, an alias, the thinking tier's).
    answers = evaluation.answers
    if body.x_diagnostics:
        answers = with_diagnostics(answers, evaluation.diagnostics)
    payload = decision_payload(body.model, answers, translation.asked, usage)
    return json_response(payload, answer_headers(evaluation, answered.prep_seconds))


@router.post(
    OPENROUTER_PATH,
    response_model=SystemOneResponse,
    responses=ERROR_RESPONSES,
    dependencies=AUTHORIZED,
    summary="OpenRouter's decisions route: the System One contract, images as `image_url` state items",
)
@router.post(
    OPENROUTER_SYSTEM_ONE_PATH,
    response_model=SystemOneResponse,
    responses=ERROR_RESPONSES,
    dependencies=AUTHORIZED,
    summary="OpenRouter's System One route (its SDK's `system_one.create()`): the body of `/api/alpha/decisions`",
)
async def openrouter_decisions(
    body: SystemOneRequest, request: Request, service: ServiceDep, runtime: RuntimeDep
) -> Response:
    long_context = asks_long_context(request.headers)
    body_bytes = len(await request.body())
    return await answer_openrouter(body, body_bytes, request.receive, service, runtime, long_context)


async def answer_openrouter(
    body: SystemOneRequest, body_bytes: int, receive: Receive, service: Service, runtime: Runtime, long_context: bool
) -> Response:
    """`POST /api/alpha/decisions` once its body is a valid request of `body_bytes` bytes (from the route,
    or from `api.fast_path`): its `image_url` and `input_image` items become assets (on a worker thread
    for a large body), its `model` slug is read, and a rejection names the items."""
    places = ImagePlaces()
    jev = await by_size(body_bytes, functools.partial(with_image_assets, body, places))
    if (model := model_of_slug(jev.model, runtime.accepted_models)) != jev.model:
        jev = jev.model_copy(update={"model": model})
    try:
        return await answer_request(jev, body_bytes, receive, service, runtime, long_context=long_context)
    except RequestRejected as error:
        raise places.rejected(error) from None
