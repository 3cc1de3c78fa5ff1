"""OpenRouter's decisions request (`POST /api/alpha/decisions`): the System One request, whose
top-level `state` array may hold images as `{"type": "image_url", "image_url": {"url": DATA_URL}}`
items (text items are plain strings).

`with_image_assets` turns each such item into an image asset whose placeholder stands in its place,
so the array reads as the official SDK sends a state that mixes text and images, and every image
rule is the asset rules' (`assets.py`), an issue of one such asset naming its item (`state[i]`). A
data URL of PNG or JPEG only; a remote URL is refused (422 naming the item's `url`), nothing is fetched.
"""

from __future__ import annotations

import secrets
from typing import Any

from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.decisions import data_url_image
from openjev.request.schema import Asset, SystemOneRequest


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
