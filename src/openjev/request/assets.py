"""The wire rules of image assets: which bytes each asset key stands for, or the issues that say why not.

An asset's key is a placeholder (the SDK writes `<image:` + 32 hex digits + `>`; a caller may choose
any non-empty string); wherever a string of the state, of a question's instructions or of its
criteria (keys and values, at any depth) holds it, the model sees that image. Its bytes come from
`data_base64` (a JSON body, `format` required beside it) or from the multipart part its `part`
names (`data_base64` is then ignored). Rules, each an `Issue` at `("assets", KEY, ...)` or at the
part's name, as FastAPI names a form field:
- a model that reads text only refuses any asset or image part (`TEXT_ONLY`), and nothing else is checked;
- `assets` present but empty; more than OPENJEV_MAX_IMAGES assets;
- an asset whose placeholder no string holds (a placeholder-looking string with no asset is text);
- a `part` the body lacks, a part claimed by two assets, a `part` in a body that is not multipart;
  a part that no asset claims;
- `data_base64` missing (and no `part`), not base64 (whitespace is ignored, as line-wrapped base64
  has it), or without its `format`; an image of no bytes, or over OPENJEV_MAX_IMAGE_BYTES; all of
  them together over OPENJEV_MAX_IMAGE_TOTAL_BYTES.
Whether the bytes are an image is `images.py`'s question, asked later, off the event loop.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

from openjev.config import Settings
from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.schema import Asset, SystemOneRequest

TEXT_ONLY = Issue(("assets",), "image assets need a vision model; the model served here reads text only", "unsupported")


def strings_in(value: Any) -> Iterator[str]:
    """Every string of a JSON value: dict keys and values, at any depth, in document order; walked
    without recursion, as it may run before the depth limit has refused a value (`validation.py`)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            pending.extend(reversed([part for pair in item.items() for part in pair]))
        elif isinstance(item, list):
            pending.extend(reversed(item))


def requeststrings_in(request: SystemOneRequest) -> Iterator[str]:
    """Every string a placeholder may sit in: the state's, each question's instructions' and criteria's."""
    yield from strings_in(request.state)
    for question in request.questions.values():
        yield from strings_in(question.model_dump(include={"instructions", "criteria"}))


def used_placeholders(request: SystemOneRequest, keys: Iterator[str] | list[str]) -> set[str]:
    """Which of `keys` some string of the request holds."""
    # NUL joins the strings: a key holding NUL is the only one that could match across two of them.
    text = "\0".join(requeststrings_in(request))
    return {key for key in keys if key in text and "\0" not in key}


def _decoded_base64(text: str, loc: Loc) -> bytes | Issue:
    compact = "".join(text.split())
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return Issue((*loc, "data_base64"), "data_base64 is not valid base64", "base64_invalid")


def _asset_bytes(key: str, asset: Asset, parts: Mapping[str, bytes] | None, claimed: dict[str, str]) -> bytes | Issue:
    loc: Loc = ("assets", key)
    if asset.part is not None:
        if parts is None:
            return Issue((*loc, "part"), "names a part, but the body is not multipart/form-data", "part_missing")
        if asset.part not in parts:
            return Issue((*loc, "part"), f"the body has no part named {asset.part!r}", "part_missing")
        if asset.part in claimed:
            return Issue(
                (*loc, "part"),
                f"the part {asset.part!r} is claimed by the asset {claimed[asset.part]!r} too; each part "
                "belongs to one asset",
                "part_claimed_twice",
            )
        claimed[asset.part] = key
        return parts[asset.part]
    if asset.data_base64 is None:
        return Issue(loc, "an image asset needs data_base64 (with its format), or part in a multipart body", "missing")
    if asset.format is None:
        return Issue((*loc, "format"), "format (png, jpg or jpeg) is required with data_base64", "missing")
    return _decoded_base64(asset.data_base64, loc)


def _count_issues(request: SystemOneRequest, settings: Settings) -> list[Issue]:
    assets = request.assets
    if assets is None:
        return []
    if not assets:
        return [Issue(("assets",), "assets must hold at least one asset; leave it out when there is none", "too_short")]
    if len(assets) > settings.max_images:
        return [
            Issue(
                ("assets",),
                f"at most {settings.max_images} images per request (OPENJEV_MAX_IMAGES), got {len(assets)}",
                "too_long",
                {"max_length": settings.max_images, "actual_length": len(assets)},
            )
        ]
    return []


def asset_sources(
    request: SystemOneRequest, parts: Mapping[str, bytes] | None, settings: Settings, *, vision: bool
) -> dict[str, bytes]:
    """The bytes of each asset, by key (empty when the request has none); `parts`: a multipart body's
    image parts by name (None: a JSON body). `RequestRejected` with every issue found."""
    assets = request.assets or {}
    if request.assets is None and not parts:
        return {}
    if not vision:
        raise RequestRejected([TEXT_ONLY])
    issues = _count_issues(request, settings)
    used = used_placeholders(request, list(assets))
    claimed: dict[str, str] = {}
    sources: dict[str, bytes] = {}
    for key, asset in assets.items():
        if key not in used:
            issues.append(
                Issue(
                    ("assets", key),
                    "no string of the state, of a question's instructions or of its criteria holds this placeholder",
                    "asset_unused",
                )
            )
        found = _asset_bytes(key, asset, parts, claimed)
        if isinstance(found, Issue):
            issues.append(found)
        elif not found:
            issues.append(Issue(("assets", key), "the image has no bytes", "too_short"))
        elif len(found) > settings.max_image_bytes:
            issues.append(
                Issue(
                    ("assets", key),
                    f"the image is {len(found)} bytes, over OPENJEV_MAX_IMAGE_BYTES={settings.max_image_bytes}",
                    "too_long",
                    {"limit": settings.max_image_bytes, "bytes": len(found)},
                )
            )
        else:
            sources[key] = found
    unclaimed = [name for name in parts or {} if name not in claimed]
    issues += [Issue((name,), f"no asset claims the part {name!r}", "part_unclaimed") for name in unclaimed]
    total = sum(map(len, sources.values()))
    if total > settings.max_image_total_bytes:
        issues.append(
            Issue(
                ("assets",),
                f"the images are {total} bytes, over OPENJEV_MAX_IMAGE_TOTAL_BYTES={settings.max_image_total_bytes}",
                "too_long",
                {"limit": settings.max_image_total_bytes, "bytes": total},
            )
        )
    if issues:
        raise RequestRejected(issues)
    return sources
