"""The top-level `images` list of a System One request (an extension that SGLang's and Ollama's own
`/v1/systemone` define): images shown before the state, in order, as those servers show them.

Each item is a base64 data URL of PNG or JPEG, bare base64 (Ollama's form), or the chat image object
`{"url": DATA_URL, "detail": ...}` (SGLang's form; its `detail` is the asset's). `with_positional_images`
turns each into an image asset whose placeholder opens the state's first user turn, so every image
rule (a text-only model, counts, sizes, decoding) is the asset rules' (`assets.py`), and an issue of
one such asset names its item (`["images", i]`; one of the assets as a whole names `images` when the
caller sent no `assets`). A remote URL is refused (nothing is fetched). Where the images go:
- a string state: the placeholders, then the text;
- a chat state (`state_messages`): at the start of the first user message's content (before a string,
  or as image parts before its parts); with no user message, a user turn of the images after the
  leading system turns;
- any other state (an object, an array): one user turn of the placeholders and the state's JSON text,
  which is the turn the state alone is shown as.
"""

from __future__ import annotations

import secrets
from typing import Any

from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.content_parts import data_url_asset, image_key
from openjev.request.schema import Asset, FreeForm, ImageURL, SystemOneRequest, render_value

#: How a bare base64 image opens (its file signature, encoded): a JPEG's `FF D8 FF`; anything else is
#: sent as PNG, whose bytes `images.py` checks (the declared format is never trusted).
JPEG_BASE64 = "/9j/"


class ImagePlaces:
    """Where each image asset made from another field came from, so an asset's issue names that field."""

    def __init__(self, whole: Loc | None = None) -> None:
        self.places: dict[str, Loc] = {}
        #: What an issue of the assets as a whole names, when the caller sent no `assets` of its own.
        self.whole = whole

    def loc(self, loc: Loc) -> Loc:
        key = loc[1] if loc[:1] == ("assets",) and len(loc) > 1 else None
        if isinstance(key, str) and key in self.places:
            return self.places[key]
        return self.whole if loc == ("assets",) and self.whole is not None else loc

    def rejected(self, error: RequestRejected) -> RequestRejected:
        return RequestRejected([Issue(self.loc(i.loc), i.msg, i.type, i.ctx) for i in error.issues])


def image_asset(item: str | ImageURL, loc: Loc) -> Asset:
    """The asset of one `images` item (module doc)."""
    if isinstance(item, ImageURL):
        return data_url_asset(item.url, (*loc, "url"), item.detail)
    if item.startswith(("data:", "https://", "http://")):
        return data_url_asset(item, loc)
    return Asset(type="image", format="jpeg" if item.lstrip().startswith(JPEG_BASE64) else "png", data_base64=item)


def _is_chat(state: FreeForm) -> bool:
    messages = state.get("messages") if isinstance(state, dict) and set(state) == {"messages"} else state
    return isinstance(messages, list) and bool(messages) and all(isinstance(m, dict) and "role" in m for m in messages)


def _opening(messages: list[Any], keys: list[str]) -> list[Any]:
    """`messages` with the images at the start of the first user turn (module doc)."""
    for index, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            opened: Any = [*({"type": "image_url", "image_url": {"url": key}} for key in keys), *content]
        elif content is None or isinstance(content, str):
            opened = "".join(keys) + (content or "")
        else:  # content the chat checks refuse, naming it: the images go in a turn of their own
            return [*messages[:index], {"role": "user", "content": "".join(keys)}, *messages[index:]]
        return [*messages[:index], {**message, "content": opened}, *messages[index + 1 :]]
    systems = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    return [*messages[:systems], {"role": "user", "content": "".join(keys)}, *messages[systems:]]


def with_positional_images(request: SystemOneRequest, places: ImagePlaces) -> SystemOneRequest:
    """`request` with its `images` as image assets placed before the state (itself when it has none)."""
    if request.images is None:
        return request
    if not request.images:
        raise RequestRejected([Issue(("images",), "images must hold at least one image; leave it out", "too_short")])
    nonce = secrets.token_hex(8)
    assets = dict(request.assets or {})
    keys = []
    for index, item in enumerate(request.images):
        key = image_key(nonce, index)
        assets[key] = image_asset(item, ("images", index))
        places.places[key] = ("images", index)
        keys.append(key)
    if request.assets is None:
        places.whole = ("images",)
    state = request.state
    if isinstance(state, str):
        shown: FreeForm = "".join(keys) + state
    elif _is_chat(state):
        chat = state["messages"] if isinstance(state, dict) else state
        opened = _opening(chat, keys)
        shown = {"messages": opened} if isinstance(state, dict) else opened
    else:
        shown = [{"role": "user", "content": "".join(keys) + render_value(state)}]
    return request.model_copy(update={"state": shown, "assets": assets, "images": None})
