"""OpenRouter's decisions request (`POST /api/alpha/decisions`): the System One request, whose
top-level `state` array may hold images as `{"type": "image_url", "image_url": {"url": DATA_URL}}`
items (text items are plain strings).

`with_image_assets` turns each such item into an image asset whose placeholder stands in its place,
so the array reads as the official SDK sends a state that mixes text and images, and every image
rule is the asset rules' (`assets.py`), an issue of one such asset naming its item (`state[i]`). A
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

from openjev.config import COMPAT_MODEL_ALIAS
from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.decisions import data_url_image
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


def _image_url(item: Any) -> tuple[Any, Loc] | None:
    """An `image_url` item's URL and where it is below the item; None for any other item."""
    if not isinstance(item, dict) or item.get("type") != "image_url":
        return None
    inner = item.get("image_url")
    return (inner.get("url"), ("image_url", "url")) if isinstance(inner, dict) else (inner, ("image_url",))


class ImageItems:
    """Where each image asset made from a state item came from, so an asset's issue names the item."""

    def __init__(self) -> None:
        self.items: dict[str, int] = {}

    def rejected(self, error: RequestRejected) -> RequestRejected:
        def loc(issue_loc: Loc) -> Loc:
            key = issue_loc[1] if issue_loc[:1] == ("assets",) and len(issue_loc) > 1 else None
            return ("state", self.items[key]) if isinstance(key, str) and key in self.items else issue_loc

        return RequestRejected([Issue(loc(i.loc), i.msg, i.type, i.ctx) for i in error.issues])


def with_image_assets(request: SystemOneRequest, places: ImageItems) -> SystemOneRequest:
    """`request` with its state's `image_url` items as image assets (itself when it has none); `places`
    learns which item each asset came from."""
    state = request.state
    if not isinstance(state, list) or not any(_image_url(item) for item in state):
        return request
    nonce = secrets.token_hex(8)
    assets: dict[str, Asset] = dict(request.assets or {})
    items: list[Any] = []
    for index, item in enumerate(state):
        found = _image_url(item)
        if found is None:
            items.append(item)
            continue
        url, below = found
        image_format, payload = data_url_image(url if isinstance(url, str) else "", ("state", index, *below))
        key = f"<openjev-image-{nonce}-{index}>"
        assets[key] = Asset(type="image", format=image_format, data_base64=payload)  # type: ignore[arg-type]
        places.items[key] = index
        items.append(key)
    return request.model_copy(update={"state": items, "assets": assets})
