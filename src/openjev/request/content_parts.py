"""What a content part carries, read within OpenAI's bounds: an image's data URL as an image asset (PNG
or JPEG, base64; a remote URL is refused, never fetched) and the placeholder key it stands behind, and
an `input_json` part's text (32 container levels, 10,000 values, 256 KiB of compact JSON at most:
`decision_limits.py`). The Decisions route (`decisions.py`), OpenRouter's (`openrouter.py`) and the
positional images (`positional_images.py`) read parts through it.
"""

from __future__ import annotations

from typing import Any

import orjson

from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.decision_limits import IMAGE_TYPES, JSON_MAX_BYTES, JSON_MAX_DEPTH, JSON_MAX_VALUES
from openjev.request.schema import Asset, render_value


def refused(loc: Loc, message: str, kind: str = "value_error") -> RequestRejected:
    return RequestRejected([Issue(loc, message, kind)])


def data_url_image(url: str, loc: Loc) -> tuple[str, str]:
    """(asset format, base64 payload) of a `data:image/png;base64,...` URL; anything else is refused."""
    if url.startswith(("https://", "http://")):
        raise refused(loc, "remote image URLs are not fetched here; send the image as a base64 data URL", "url")
    head, comma, payload = url.partition(",")
    if not url.startswith("data:") or not comma or not head.endswith(";base64"):
        raise refused(loc, "an image must be a base64 data URL (data:image/png;base64,...)", "url")
    media_type = head[len("data:") : -len(";base64")].lower()
    if media_type not in IMAGE_TYPES:
        raise refused(loc, f"images must be PNG or JPEG, got {media_type or 'no media type'!r}", "image_format")
    return IMAGE_TYPES[media_type], payload


def data_url_asset(url: str, loc: Loc, detail: str | None = None) -> Asset:
    """The image asset of a data URL (`data_url_image`); of its `detail`, only `low` changes how it is
    shown (`images.py`), so any other is dropped."""
    image_format, payload = data_url_image(url, loc)
    return Asset(type="image", format=image_format, data_base64=payload, detail="low" if detail == "low" else None)  # type: ignore[arg-type]


def image_key(nonce: str, index: int) -> str:
    """The placeholder of a request's `index`-th image made from another field than `assets` (`nonce`:
    fresh per request, so no text the caller sent can name it)."""
    return f"<openjev-image-{nonce}-{index}>"


def json_part_text(data: Any, loc: Loc) -> str:
    """An `input_json` part's text, within OpenAI's bounds."""
    values, deepest, stack = 0, 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        values += 1
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            stack += [(item, depth + 1) for item in (value.values() if isinstance(value, dict) else value)]
    if deepest > JSON_MAX_DEPTH:
        raise refused(loc, f"input_json nests {deepest} levels, over {JSON_MAX_DEPTH}", "too_deep")
    if values > JSON_MAX_VALUES:
        raise refused(loc, f"input_json holds {values} values, over {JSON_MAX_VALUES}", "too_long")
    try:
        size = len(orjson.dumps(data))
    except orjson.JSONEncodeError:
        size = len(render_value(data).encode("utf-8", "surrogatepass"))
    if size > JSON_MAX_BYTES:
        raise refused(loc, f"input_json is {size} bytes of compact JSON, over {JSON_MAX_BYTES}", "too_long")
    return render_value(data)
