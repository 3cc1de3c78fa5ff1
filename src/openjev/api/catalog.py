"""The model catalogs: every name a request's `model` may say, as each contract's clients list them.

- `GET /v1/models`: TypeSafe's `models` (name, description, release date, `x_images`) and OpenAI's
  `data` (id, created, owner), each entry with its `output_modalities` (`["decisions"]`). Every
  model is listed; `?output_modalities=` (comma-separated, or `all`) keeps those with one of them.
- `GET /api/v1/models`: OpenRouter's catalog, `{"data": [...]}` with its model object (id, canonical
  slug, name, created, description, context length, architecture, pricing, top provider, per-request
  limits, supported parameters). Its ids are the slugs `POST /api/alpha/decisions` takes for the served
  model: the served name, `~typesafe/jev-latest`, OpenAI's names with OpenRouter's `-decisions` suffix
  (`openai/gpt-6-luna-decisions`) and OPENJEV_MODEL_ALIASES. As on OpenRouter, a request without
  `output_modalities` gets text models only, which is none here: decision models are listed by
  `?output_modalities=decisions` (or `all`). Prices are 0: nothing is billed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Query

from openjev.api.dependencies import AUTHORIZED, ServiceDep
from openjev.api.errors import AUTH_RESPONSES
from openjev.endpoints import COMPAT_MODEL_ALIAS
from openjev.request.openrouter import DECISIONS_MODALITY, DECISIONS_SUFFIX, modalities_asked
from openjev.request.schema import ModelList
from openjev.service import Service

router = APIRouter()

#: Every model served here answers decisions, and only decisions.
OUTPUT_MODALITIES = [DECISIONS_MODALITY]
#: OpenRouter's name of Jev's latest release, accepted for the served model.
JEV_LATEST_SLUG = f"~typesafe/{COMPAT_MODEL_ALIAS}"

MODALITIES_FILTER = Query(
    None,
    description="Comma-separated output modalities (`decisions`, `text`, ...) or `all`; a model is listed when it "
    "has one of them.",
)


def listed(output_modalities: str | None, absent: frozenset[str] | None) -> bool:
    """Whether models of `OUTPUT_MODALITIES` are listed for this filter; `absent` is what no filter asks."""
    asked = absent if output_modalities is None else modalities_asked(output_modalities)
    return asked is None or DECISIONS_MODALITY in asked


def names(service: Service) -> list[tuple[str, str]]:
    """(name, description) of every name the answering routes take."""
    served, aliases = service.model_names()
    return [
        (COMPAT_MODEL_ALIAS, f"Alias of {served or 'the served model'}."),
        *([(served, "The model that answers, by first-token readout.")] if served else []),
        *((alias, f"Alias of {served}.") for alias in aliases),
        (
            service.settings.think_model,
            f"{served or 'The served model'}, thinking first on the questions it is least sure of.",
        ),
    ]


@router.get(
    "/v1/models",
    response_model=ModelList,
    responses=AUTH_RESPONSES,
    dependencies=AUTHORIZED,
    summary="List model names",
)
async def list_models(service: ServiceDep, output_modalities: str | None = MODALITIES_FILTER) -> dict[str, Any]:
    released = service.settings.model_release_date or dt.date.today().isoformat()
    shown = names(service) if listed(output_modalities, None) else []
    created = int(service.started_wall)
    images = service.backend.vision is not None if service.current else None
    think = service.settings.think_model  # the thinking tier reads text only (`image_marks.py`)
    return {
        "models": [
            {
                "name": name,
                "description": text,
                "release_date": released,
                "x_images": False if name == think else images,
            }
            for name, text in shown
        ],
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "openjev",
                "output_modalities": OUTPUT_MODALITIES,
            }
            for name, _ in shown
        ],
    }


def openrouter_slugs(service: Service) -> list[str]:
    """The ids of OpenRouter's catalog: slugs `POST /api/alpha/decisions` reads as the served model."""
    served, _ = service.model_names()
    openai = [f"openai/{name}{DECISIONS_SUFFIX}" for name in service.settings.openai_model_aliases]
    slugs = [*([served] if served else []), JEV_LATEST_SLUG, *openai, *service.settings.model_aliases]
    return list(dict.fromkeys(slugs))


def openrouter_model(slug: str, service: Service) -> dict[str, Any]:
    """One entry of OpenRouter's catalog."""
    served = service.model_names()[0] or "the served model"
    images = service.current is not None and service.backend.vision is not None
    inputs = ["text", "image"] if images else ["text"]
    context = service.backend.context_length
    return {
        "id": slug,
        "canonical_slug": slug,
        "name": served if slug == served else f"{slug} ({served})",
        "created": int(service.started_wall),
        "description": f"{served}, answering decisions by first-token readout.",
        "context_length": context,
        "architecture": {
            "modality": f"{'+'.join(inputs)}->{DECISIONS_MODALITY}",
            "input_modalities": inputs,
            "output_modalities": OUTPUT_MODALITIES,
            "tokenizer": "Other",
            "instruct_type": None,
        },
        "pricing": {"prompt": "0", "completion": "0", "request": "0", "image": "0"},
        "top_provider": {"context_length": context, "max_completion_tokens": None, "is_moderated": False},
        "per_request_limits": None,
        "supported_parameters": [],
    }


@router.get(
    "/api/v1/models",
    responses=AUTH_RESPONSES,
    dependencies=AUTHORIZED,
    summary="OpenRouter's model catalog: the slugs of the served model",
)
async def openrouter_models(service: ServiceDep, output_modalities: str | None = MODALITIES_FILTER) -> dict[str, Any]:
    if not listed(output_modalities, frozenset({"text"})):  # OpenRouter's default: text models only
        return {"data": []}
    return {"data": [openrouter_model(slug, service) for slug in openrouter_slugs(service)]}
