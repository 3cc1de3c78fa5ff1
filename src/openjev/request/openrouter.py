"""OpenRouter's decisions request (`POST /api/alpha/decisions`): the System One request, whose
top-level `state` array may hold images as `{"type": "image_url", "image_url": {"url": DATA_URL}}`
items (text items are plain strings), or as OpenAI's `{"type": "input_image", "image_url": DATA_URL}`.

`with_image_assets` turns each such item into an image asset whose placeholder stands in its place,
so the array reads as the official SDK sends a state that mixes text and images, and every image
rule is the asset rules' (`assets.py`), an issue of one such asset naming its item (`state[i]`; one
of the assets as a whole, `state`, when the caller sent no `assets`). A
data URL of PNG or JPEG only; a remote URL is refused (422 naming the item's `url`), nothing is fetched.

`model_of_slug` reads the `model` as OpenRouter writes it, `[~]author/name[:variant]`: the `~` of a
latest alias (`~typesafe/jev-latest`), a routing variant (`:nitro`, `:floor`, `:exacto`: they pick a
provider, never the model) and the author are dropped, then the name is looked up among the names
`/v1/systemone` takes, with OpenRouter's `-decisions` suffix of OpenAI's decision models dropped too
(`openai/gpt-6-luna-decisions` is `gpt-6-luna`); a Jev release or dated snapshot (`typesafe/jev-1.14`,
`typesafe/jev-1.13-20260917`) is `jev-latest`. Any other slug stays as sent, and is refused as an
unknown model. `modalities_asked` reads the catalog's `output_modalities` filter.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection
from typing import Any

from openjev.endpoints import COMPAT_MODEL_ALIAS
from openjev.errors import Loc
from openjev.request.decisions import data_url_asset, image_key
from openjev.request.positional_images import ImagePlaces
from openjev.request.schema import Asset, SystemOneRequest

#: OpenRouter's routing variants: accepted on any model, they choose a provider and leave the model as it is.
ROUTING_VARIANTS = frozenset({"nitro", "floor", "exacto"})
#: The suffix of OpenAI's decision models on OpenRouter (`openai/gpt-6-luna-decisions`).
DECISIONS_SUFFIX = "-decisions"
#: A Jev release or dated snapshot as OpenRouter names it after its author (`jev-1.14`, `jev-1.13-20260917`).
JEV_RELEASE = re.compile(r"jev-\d+(?:\.\d+)*(?:-\d{8})?")
#: The output modality of decision models in OpenRouter's catalog; `all` lists every model.
DECISIONS_MODALITY = "decisions"


def model_of_slug(slug: str, accepted: Collection[str]) -> str:
    """The name among `accepted` that an OpenRouter slug stands for; the slug itself when none does."""
    if slug in accepted:
        return slug
    stem = slug.removeprefix("~")
    head, colon, variant = stem.rpartition(":")
    if colon and variant in ROUTING_VARIANTS:
        stem = head
    author, _, name = stem.rpartition("/")
    for candidate in (stem, name, name.removesuffix(DECISIONS_SUFFIX)):
        if candidate in accepted:
            return candidate
    if author == "typesafe" and JEV_RELEASE.fullmatch(name):
        return COMPAT_MODEL_ALIAS
    return slug


def modalities_asked(output_modalities: str) -> frozenset[str] | None:
    """The output modalities a catalog's `output_modalities` filter names (comma-separated); None for
    every model (`all`)."""
    asked = frozenset(part.strip() for part in output_modalities.split(",") if part.strip())
    return None if "all" in asked else asked


#: The state items that are images: OpenRouter's chat form, and OpenAI's `input_image` part (whose
#: `image_url` is the URL itself).
IMAGE_ITEMS = frozenset({"image_url", "input_image"})


def _image_url(item: Any) -> tuple[Any, Loc] | None:
    """An image item's URL and where it is below the item; None for any other item."""
    if not isinstance(item, dict) or item.get("type") not in IMAGE_ITEMS:
        return None
    inner = item.get("image_url")
    return (inner.get("url"), ("image_url", "url")) if isinstance(inner, dict) else (inner, ("image_url",))


def with_image_assets(request: SystemOneRequest, places: ImagePlaces) -> SystemOneRequest:
    """`request` with its state's image items as image assets (itself when it has none); `places`
    learns which item each asset came from."""
    state = request.state
    if not isinstance(state, list) or not any(_image_url(item) for item in state):
        return request
    nonce = secrets.token_hex(8)
    if request.assets is None:
        places.whole = ("state",)
    assets: dict[str, Asset] = dict(request.assets or {})
    items: list[Any] = []
    for index, item in enumerate(state):
        found = _image_url(item)
        if found is None:
            items.append(item)
            continue
        url, below = found
        key = image_key(nonce, index)
        inner = item.get("image_url")
        detail = "low" if "low" in (item.get("detail"), isinstance(inner, dict) and inner.get("detail")) else None
        assets[key] = data_url_asset(url if isinstance(url, str) else "", ("state", index, *below), detail)
        places.places[key] = ("state", index)
        items.append(key)
    return request.model_copy(update={"state": items, "assets": assets})
