"""Images through the other decision routes, against openjev on the fake SGLang in vision mode: OpenAI's
`input_image` data URLs and OpenRouter's `image_url` state items, each answered exactly as the same
images sent as `/v1/systemone` assets."""

from __future__ import annotations

import base64

import httpx
import openai
import pytest

from tests.api.test_images import pixels, png
from tests.conftest import running_stack
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.vision import IMAGE_PAD

RED, BLUE = png(300, 200, (200, 30, 30)), png(120, 90, (20, 30, 200))
NOUL = {"type": "noul", "instructions": "Is the picture red?"}


def data_url(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode()


def photo(image: bytes) -> list[dict]:
    """One user message: a line of text, then the image."""
    content = [{"type": "input_text", "text": "Photo:"}, {"type": "input_image", "image_url": data_url(image)}]
    return [{"role": "user", "content": content}]


def asset(image: bytes) -> dict:
    return {"type": "image", "format": "png", "data_base64": base64.b64encode(image).decode()}


@pytest.fixture(scope="module")
def vision_stack(qwen_tokenizer_dir, tmp_path_factory):
    fake = FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir))
    with running_stack(fake, qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@pytest.fixture(scope="module")
def client(vision_stack):
    server, _ = vision_stack
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        yield client


def systemone(server, state, questions, assets):
    body = {"model": "jev-latest", "state": state, "questions": questions, "assets": assets}
    response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def test_input_images_are_answered_as_the_same_assets_on_systemone(vision_stack, client):
    server, fake = vision_stack
    before = len(fake.generate_calls)
    decision = client.decisions.create(
        model="gpt-6-luna",
        input=photo(RED),
        questions=[
            {"type": "predicate", "instructions": "Is the picture red?"},
            {
                "type": "predicate",
                "instructions": [
                    {"type": "input_text", "text": "Same as this?"},
                    {"type": "input_image", "image_url": data_url(BLUE)},
                ],
            },
        ],
    )
    calls = [call["body"] for call in fake.generate_calls[before:] if "image_data" in call["body"]]
    # The warm-up and both branches hold the input's image; the second question's branch its own after it.
    assert len(calls) == 3 and all(call["input_ids"].count(IMAGE_PAD) == len(call["image_data"]) for call in calls)
    assert sorted(len(call["image_data"]) for call in calls) == [1, 1, 2]
    assert all(pixels(base64.b64decode(call["image_data"][0])) == pixels(RED) for call in calls)
    jev = systemone(
        server,
        [{"role": "user", "content": "Photo:\n<image:a>"}],
        {"0": NOUL, "1": {"type": "noul", "instructions": "Same as this?\n<image:b>"}},
        {"<image:a>": asset(RED), "<image:b>": asset(BLUE)},
    )
    assert [answer.probability for answer in decision.answers] == pytest.approx(
        [jev["0"]["noul"], jev["1"]["noul"]], abs=1e-9
    )
    other = client.decisions.create(
        model="gpt-6-luna",
        input=photo(BLUE),
        questions=[{"type": "predicate", "instructions": "Is the picture red?"}],
    )
    assert other.answers[0].probability != decision.answers[0].probability


def test_an_image_that_is_no_png_or_jpeg_is_a_400_naming_its_part(client):
    for url, code in [("data:image/gif;base64,R0lGOD", "image_format"), ("data:image/png;base64,iVBORw0K", None)]:
        with pytest.raises(openai.BadRequestError) as caught:
            client.decisions.create(
                model="gpt-6-luna",
                input=[{"role": "user", "content": [{"type": "input_image", "image_url": url}]}],
                questions=[{"type": "predicate", "instructions": "?"}],
            )
        assert caught.value.param.startswith("input[0].content[0]"), caught.value.param
        assert code is None or caught.value.code == code


def test_openrouter_image_url_items_are_answered_as_the_same_assets(vision_stack):
    server, _ = vision_stack
    state = ["The customer sent:", {"type": "image_url", "image_url": {"url": data_url(RED)}}]
    body = {"model": "jev-latest", "state": state, "questions": {"q": NOUL}}
    response = httpx.post(f"{server.url}/api/alpha/decisions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    jev = systemone(server, ["The customer sent:", "<image:x>"], {"q": NOUL}, {"<image:x>": asset(RED)})
    assert response.json()["answers"]["q"]["noul"] == pytest.approx(jev["q"]["noul"], abs=1e-9)


def test_openrouter_refusals_name_the_state_item(vision_stack):
    server, _ = vision_stack

    def post(item):
        body = {"model": "jev-latest", "state": ["x", item], "questions": {"q": NOUL}}
        response = httpx.post(f"{server.url}/api/alpha/decisions", json=body, timeout=30)
        assert response.status_code == 422, response.text
        return [entry["loc"] for entry in response.json()["detail"]]

    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert post(remote) == [["body", "state", 1, "image_url", "url"]]
    corrupt = {"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}
    assert post(corrupt)[0][:3] == ["body", "state", 1]
