"""OpenRouter's decisions request (`POST /api/alpha/decisions`): the System One request, whose
top-level `state` array may hold images as `{"type": "image_url", "image_url": {"url": DATA_URL}}`
items (text items are plain strings), or as OpenAI's `{"type": "input_image", "image_url": DATA_URL}`.

`with_image_assets` turns each such item into an image asset whose placeholder stands in its place,
so the array reads as the official SDK sends a state that mixes text and images, and every image
rule is the asset rules' (`assets.py`), an issue of one such asset naming its item (`state[i]`; one
of the assets as a whole, `state`, when the caller sent no `assets`). A
data URL of PNG or JPEG only; a remote URL is refused (422 naming the item's `url`), nothing is fetched.
"""

from __future__ import annotations

import secrets
from typing import Any

from openjev.errors import Loc
from openjev.request.decisions import data_url_image
from openjev.request.positional_images import ImagePlaces
from openjev.request.schema import Asset, SystemOneRequest

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
        image_format, payload = data_url_image(url if isinstance(url, str) else "", ("state", index, *below))
        key = f"<openjev-image-{nonce}-{index}>"
        inner = item.get("image_url")
        detail = "low" if "low" in (item.get("detail"), isinstance(inner, dict) and inner.get("detail")) else None
        assets[key] = Asset(type="image", format=image_format, data_base64=payload, detail=detail)  # type: ignore[arg-type]
        places.places[key] = ("state", index)
        items.append(key)
    return request.model_copy(update={"state": items, "assets": assets})
