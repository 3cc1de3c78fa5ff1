"""Where `with_positional_images` puts a request's `images`: before the state, as the module says, and
which field a refusal of one names."""

from __future__ import annotations

import pytest

from openjev.errors import Issue, RequestRejected
from openjev.request.content_parts import data_url_asset
from openjev.request.openrouter import with_image_assets
from openjev.request.positional_images import ImagePlaces, with_positional_images
from openjev.request.schema import ImageURL, SystemOneRequest

QUESTIONS = {"q": {"type": "noul", "instructions": "?"}}
JPEG, PNG = "/9j/4AAQSkZJRg==", "iVBORw0KGgo="


def placed(state, images=(PNG,)):
    places = ImagePlaces()
    request = SystemOneRequest(model="m", state=state, questions=QUESTIONS, images=list(images))
    request = with_positional_images(request, places)
    shown = repr(request.state)
    for index, key in enumerate(request.assets or {}):
        shown = shown.replace(key, f"<{index}>")
    return shown, request, places


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        ("text", "'<0><1>text'"),
        ({"ticket": 7}, "[{'role': 'user', 'content': '<0><1>{\"ticket\": 7}'}]"),
        (
            [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            "[{'role': 'system', 'content': 's'}, {'role': 'user', 'content': '<0><1>u'}]",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "u"}]}]},
            "{'messages': [{'role': 'user', 'content': [{'type': 'image_url', 'image_url': {'url': '<0>'}}, "
            "{'type': 'image_url', 'image_url': {'url': '<1>'}}, {'type': 'text', 'text': 'u'}]}]}",
        ),
        (
            [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
            "[{'role': 'system', 'content': 's'}, {'role': 'user', 'content': '<0><1>'}, "
            "{'role': 'assistant', 'content': 'a'}]",
        ),
    ],
)
def test_images_open_the_first_user_turn(state, shown):
    got, request, _ = placed(state, (PNG, JPEG))
    assert got == shown and request.images is None
    assert [asset.format for asset in (request.assets or {}).values()] == ["png", "jpeg"]


def test_a_refusal_of_an_image_names_its_item_and_of_all_of_them_the_list():
    _, request, places = placed("x", (PNG, JPEG))
    second = list(request.assets or {})[1]
    error = RequestRejected([Issue(("assets", second, "data_base64"), "bad"), Issue(("assets",), "text only")])
    assert [issue.loc for issue in places.rejected(error).issues] == [("images", 1), ("images",)]


def test_every_image_field_makes_the_same_asset_and_keeps_only_low_detail():
    url = f"data:image/png;base64,{PNG}"
    for detail in ("low", "high", "auto", None):
        kept = "low" if detail == "low" else None
        _, positional, _ = placed("x", [ImageURL(url=url, detail=detail)])
        state = [{"type": "image_url", "image_url": {"url": url, "detail": detail}}]
        routed = with_image_assets(SystemOneRequest(model="m", state=state, questions=QUESTIONS), ImagePlaces())
        made = [*positional.assets.values(), *routed.assets.values(), data_url_asset(url, ("input",), detail)]
        assert [(asset.format, asset.data_base64, asset.detail) for asset in made] == [("png", PNG, kept)] * 3
