"""The top-level `images` list (SGLang's and Ollama's `/v1/systemone` extension) and OpenAI-style
`input_image` state items on OpenRouter's route, against openjev on the fake SGLang: each is answered
exactly as the same image sent as an asset where the module says it goes, and refused by name where it
cannot be shown; never dropped."""

from __future__ import annotations

import base64
import io

import httpx
import pytest
from PIL import Image

from tests.api.test_decision_images import BLUE, RED, asset, data_url, systemone
from tests.api.test_images import png

NOUL = {"type": "noul", "instructions": "Is the picture red?"}


def answer(server, path, body, status=200):
    response = httpx.post(f"{server.url}{path}", json={"model": "jev-latest", "questions": {"q": NOUL}, **body})
    assert response.status_code == status, response.text
    return response.json()


def noul(server, path, **body) -> float:
    return answer(server, path, body)["answers"]["q"]["noul"]


@pytest.mark.parametrize(
    "form",
    [
        data_url,
        lambda image: base64.b64encode(image).decode(),
        lambda image: {"url": data_url(image), "detail": "auto"},
    ],
)
def test_images_show_before_a_text_state_as_the_same_assets(vision_stack, form):
    server, _ = vision_stack
    shown = noul(server, "/v1/systemone", state="Photo:", images=[form(RED), form(BLUE)])
    jev = systemone(
        server, "<image:a><image:b>Photo:", {"q": NOUL}, {"<image:a>": asset(RED), "<image:b>": asset(BLUE)}
    )
    assert shown == pytest.approx(jev["q"]["noul"], abs=1e-9)
    assert noul(server, "/v1/systemone", state="Photo:", images=[form(BLUE), form(RED)]) != pytest.approx(shown)


def test_images_open_the_first_user_turn_of_a_chat_and_the_turn_of_a_json_state(vision_stack):
    server, _ = vision_stack
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Photo:"}]
    shown = noul(server, "/api/alpha/decisions", state=chat, images=[data_url(RED)])
    placed = [chat[0], {"role": "user", "content": "<image:a>Photo:"}]
    assert shown == pytest.approx(systemone(server, placed, {"q": NOUL}, {"<image:a>": asset(RED)})["q"]["noul"])
    parts = [{"role": "user", "content": [{"type": "text", "text": "Photo:"}]}]
    shown = noul(server, "/v1/systemone", state=parts, images=[data_url(RED)])
    placed = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "<i>"}}, parts[0]["content"][0]]}]
    assert shown == pytest.approx(systemone(server, placed, {"q": NOUL}, {"<i>": asset(RED)})["q"]["noul"])
    shown = noul(server, "/v1/systemone", state={"ticket": 7}, images=[data_url(RED)])
    placed = [{"role": "user", "content": '<i>{"ticket": 7}'}]
    assert shown == pytest.approx(systemone(server, placed, {"q": NOUL}, {"<i>": asset(RED)})["q"]["noul"])


def test_openrouter_input_image_items_are_images(vision_stack):
    server, _ = vision_stack
    state = ["The customer sent:", {"type": "input_image", "image_url": data_url(RED), "detail": "auto"}]
    shown = noul(server, "/api/alpha/decisions", state=state)
    jev = systemone(server, ["The customer sent:", "<image:x>"], {"q": NOUL}, {"<image:x>": asset(RED)})
    assert shown == pytest.approx(jev["q"]["noul"], abs=1e-9)


def test_an_image_that_cannot_be_shown_is_refused_naming_its_item(vision_stack, stack):
    server, _ = vision_stack

    def locs(server, **body):
        return [entry["loc"] for entry in answer(server, "/v1/systemone", {"state": "x", **body}, 422)["detail"]]

    assert locs(server, images=["https://example.com/cat.png"]) == [["body", "images", 0]]
    assert locs(server, images=[{"url": "http://example.com/cat.png"}]) == [["body", "images", 0, "url"]]
    assert locs(server, images=[data_url(RED), "bm90IGFuIGltYWdl"])[0][:3] == ["body", "images", 1]
    assert locs(server, images=[]) == [["body", "images"]]
    text_only, _ = stack
    assert locs(text_only, images=[data_url(RED)]) == [["body", "images"]]
    item = {"type": "input_image", "image_url": data_url(RED)}
    refused = answer(text_only, "/api/alpha/decisions", {"state": ["x", item]}, 422)["detail"]
    assert [entry["loc"] for entry in refused] == [["body", "state"]] and "reads text only" in refused[0]["msg"]


def test_low_detail_shows_an_image_within_512x512_pixels_on_every_route(vision_stack):
    server, fake = vision_stack
    big = png(1000, 800, (200, 30, 30))

    def size_sent(path, body) -> tuple[int, int]:
        before = len(fake.generate_calls)
        response = httpx.post(f"{server.url}{path}", json=body, timeout=30)
        assert response.status_code == 200, response.text
        call = next(call["body"] for call in fake.generate_calls[before:] if "image_data" in call["body"])
        return Image.open(io.BytesIO(base64.b64decode(call["image_data"][0]))).size

    for detail in ("low", "high"):
        part = {"type": "input_image", "image_url": data_url(big), "detail": detail}
        openai_body = {
            "model": "gpt-6-luna",
            "input": [{"role": "user", "content": [part]}],
            "questions": [{"type": "predicate", "instructions": "Red?"}],
        }
        sizes = {
            size_sent("/v1/decisions", openai_body),
            size_sent("/api/alpha/decisions", {"model": "jev-latest", "state": ["x", part], "questions": {"q": NOUL}}),
            size_sent(
                "/v1/systemone",
                {
                    "model": "jev-latest",
                    "state": "x",
                    "images": [{"url": data_url(big), "detail": detail}],
                    "questions": {"q": NOUL},
                },
            ),
        }
        (width, height), *others = sizes
        assert not others
        assert (width * height <= 512 * 512 and width > 500) if detail == "low" else (width, height) == (1000, 800)


@pytest.mark.parametrize("path", ["/v1/systemone", "/api/alpha/decisions"])
def test_counts_past_the_caps_are_named_in_the_words_clients_look_for(stack, path):
    server, _ = stack
    questions = {
        "c": {"type": "choice", "criteria": {f"o{i}": None for i in range(256)}},
        "s": {"type": "score", "criteria": [f"level {i}" for i in range(65)]},
    }
    response = httpx.post(f"{server.url}{path}", json={"model": "jev-latest", "state": "x", "questions": questions})
    assert response.status_code == 422
    found = {tuple(entry["loc"]): entry["msg"] for entry in response.json()["detail"]}
    assert "1 to 255 options per choice, got 256" in found[("body", "questions", "c", "criteria")]
    assert "1 to 64 levels per score, got 65" in found[("body", "questions", "s", "criteria")]
