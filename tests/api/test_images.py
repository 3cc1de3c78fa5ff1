"""Image assets end to end: the official SDK's `Image` (multipart, zstd) and JSON `data_base64`, against
openjev on the fake SGLang in vision mode (`tests/fake_sglang/vision.py`) and on a text-only one."""

from __future__ import annotations

import base64
import io
import json
import threading
import time

import httpx
import pytest
import typesafe_sdk
from PIL import Image as PILImage
from typesafe_sdk import Choice, Image, Noul, RetryPolicy, TypeSafeClient

from tests.conftest import gzip_compress, launch_openjev, running_stack, stop_openjev
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.vision import IMAGE_PAD, SPEC

CRITERIA = {"cat": "A cat is shown", "dog": "A dog is shown", "car": None}


def png(width: int, height: int, color: tuple[int, int, int], mode: str = "RGB") -> bytes:
    """A picture with some structure (a gradient over `color`), as PNG bytes."""
    image = PILImage.new(mode, (width, height), color)
    for x in range(0, width, 7):
        image.putpixel((x, x * height // width), (255 - color[0], x % 256, 90))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def pixels(data: bytes) -> bytes:
    return PILImage.open(io.BytesIO(data)).convert("RGB").tobytes()


def ask(sdk: TypeSafeClient, state_png: bytes, choice_png: bytes):
    """A state image and a choice question whose instructions show another image (`Image` objects in the
    content: the SDK sends each as a multipart part, its placeholder where the object stands)."""
    photo, reference = Image(state_png), Image(choice_png)
    return sdk.system_one(
        state=["The customer sent this photo:", photo],
        questions={
            "match": Choice(
                instructions=["Which animal matches this reference picture?", reference], criteria=CRITERIA
            ),
            "urgent": Noul(instructions="Is the photo blurry?"),
        },
    )


def image_calls(fake: FakeSGLang, since: int) -> list[dict]:
    return [call["body"] for call in fake.generate_calls[since:]]


def test_the_sdk_asks_about_a_state_image_and_a_question_image(vision_stack, sdk):
    _, fake = vision_stack
    state_png, choice_png = png(300, 200, (200, 30, 30)), png(320, 240, (20, 30, 200))
    before = len(fake.generate_calls)
    result = ask(sdk, state_png, choice_png)
    assert result.choices["match"].choice in CRITERIA
    assert abs(sum(result.choices["match"].probabilities.values()) - 1) < 1e-9
    # Every call over the shared prefix holds the state image (the warm-up and the branches); the
    # choice's its own after it. A content-free readout (a neutral state) holds none.
    calls = [call for call in image_calls(fake, before) if IMAGE_PAD in call["input_ids"] or "image_data" in call]
    assert len(calls) == 3 and all(call["input_ids"].count(IMAGE_PAD) == len(call["image_data"]) for call in calls)
    shown = [[pixels(base64.b64decode(entry)) for entry in call["image_data"]] for call in calls]
    assert all(images[0] == pixels(state_png) for images in shown)
    assert [pixels(choice_png)] in [images[1:] for images in shown]
    assert all(base64.b64decode(entry).startswith(b"\x89PNG") for call in calls for entry in call["image_data"])
    # Each image counts once, as the positions the processor expands it to (SGLang's prompt_tokens): more
    # than its one pad among the ids sent once (the warm-up's prefix, each branch's own).
    prefix = min(len(call["input_ids"]) for call in calls)
    ids_once = prefix + sum(len(call["input_ids"]) - prefix for call in calls)
    assert result.usage.input_tokens > ids_once


def test_another_state_image_gives_other_probabilities_and_the_same_image_is_a_cache_hit(vision_stack, sdk):
    _, fake = vision_stack
    choice_png = png(320, 240, (20, 30, 200))
    first = ask(sdk, png(300, 200, (200, 30, 30)), choice_png).choices["match"].probabilities
    other = ask(sdk, png(300, 200, (30, 200, 30)), choice_png).choices["match"].probabilities
    again = ask(sdk, png(300, 200, (200, 30, 30)), choice_png).choices["match"].probabilities
    assert first != other and first == again
    # The repeated state image: its warm-up found the whole earlier prefix, image positions included.
    warm = fake.generate_calls[-3]["body"]
    assert fake.cached_tokens[warm["rid"]] >= len(warm["input_ids"]) - 1


def test_json_data_base64_with_curl_s_body_and_the_counts_include_image_tokens(vision_stack):
    server, fake = vision_stack
    picture = png(640, 480, (10, 120, 10))
    body = {
        "model": "jev-latest",
        "state": "Photo: <image:1>",
        "questions": {"q": {"type": "noul", "instructions": "Is it green?"}},
        "assets": {"<image:1>": {"type": "image", "format": "png", "data_base64": base64.b64encode(picture).decode()}},
    }
    response = httpx.post(f"{server.url}/v1/systemone", json=body, headers={"TypeSafe-Danger-Zone-Images": "true"})
    assert response.status_code == 200, response.text
    warm = fake.generate_calls[-2]["body"]
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    assert prefix == len(warm["input_ids"]) - 1 + SPEC.image_tokens(480, 640)


def test_a_gzip_multipart_body_as_the_sdk_writes_it(vision_stack):
    server, _ = vision_stack
    question = {"q": {"type": "noul", "instructions": "?"}}
    request = {
        "model": "jev-latest",
        "state": "Look: <image:a>",
        "questions": question,
        "assets": {"<image:a>": {"type": "image", "part": "asset-0"}},
    }
    files = {
        "request": (None, json.dumps(request), "application/json"),
        "asset-0": ("asset-0", png(64, 64, (1, 2, 3)), "image/png"),
    }
    prepared = httpx.Request("POST", f"{server.url}/v1/systemone", files=files)
    body = gzip_compress(prepared.read())
    headers = {"content-type": prepared.headers["content-type"], "content-encoding": "gzip"}
    assert httpx.post(f"{server.url}/v1/systemone", content=body, headers=headers).status_code == 200


def detail(response: httpx.Response) -> list[list]:
    assert 400 <= response.status_code < 500, response.text
    return [entry["loc"] for entry in response.json()["detail"]]


def test_every_asset_rule_is_a_4xx_naming_the_field(vision_stack):
    server, _ = vision_stack
    good = base64.b64encode(png(40, 40, (9, 9, 9))).decode()
    question = {"q": {"type": "noul", "instructions": "Is <image:x> dark?"}}

    def post(assets, state="x", **extra):
        sent = {"model": "jev-latest", "state": state, "questions": question, "assets": assets}
        return httpx.post(f"{server.url}/v1/systemone", json=sent, **extra)

    image = {"type": "image", "format": "png", "data_base64": good}
    assert ["body", "assets"] in detail(post({}))
    assert ["body", "assets", "<image:y>"] in detail(post({"<image:x>": image, "<image:y>": image}))
    assert ["body", "assets", "<image:x>", "data_base64"] in detail(post({"<image:x>": {**image, "data_base64": "@@"}}))
    assert ["body", "assets", "<image:x>", "format"] in detail(
        post({"<image:x>": {"type": "image", "data_base64": good}})
    )
    assert ["body", "assets", "<image:x>", "part"] in detail(post({"<image:x>": {"type": "image", "part": "asset-0"}}))
    gif = base64.b64encode(b"GIF89a" + b"\0" * 40).decode()
    assert ["body", "assets", "<image:x>"] in detail(post({"<image:x>": {**image, "data_base64": gif}}))
    # A placeholder-looking string with no asset is text: it is answered.
    answered = httpx.post(
        f"{server.url}/v1/systemone", json={"model": "jev-latest", "state": "<image:zz>", "questions": question}
    )
    assert answered.status_code == 200


def test_multipart_parts_are_claimed_exactly_once(vision_stack):
    server, _ = vision_stack
    picture = png(40, 40, (9, 9, 9))

    def post(assets, parts):
        request = {
            "model": "jev-latest",
            "state": "<image:a> <image:b>",
            "assets": assets,
            "questions": {"q": {"type": "noul", "instructions": "?"}},
        }
        files = {"request": (None, json.dumps(request), "application/json")}
        files |= {name: (name, picture, "image/png") for name in parts}
        return httpx.post(f"{server.url}/v1/systemone", files=files)

    claim = {"type": "image", "part": "asset-0"}
    assert ["body", "asset-1"] in detail(
        post({"<image:a>": claim, "<image:b>": {**claim, "part": "asset-0"}}, ["asset-0", "asset-1"])
    )
    assert ["body", "assets", "<image:b>", "part"] in detail(
        post({"<image:a>": claim, "<image:b>": claim}, ["asset-0"])
    )
    assert ["body", "assets", "<image:b>", "part"] in detail(
        post({"<image:a>": claim, "<image:b>": {**claim, "part": "asset-9"}}, ["asset-0"])
    )
    assert (
        post({"<image:a>": claim, "<image:b>": {**claim, "part": "asset-1"}}, ["asset-0", "asset-1"]).status_code == 200
    )


def test_a_body_of_many_parts_is_refused_at_the_part_past_the_limit(vision_stack):
    server, _ = vision_stack
    request = {"model": "jev-latest", "state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}}
    files = [("request", (None, json.dumps(request), "application/json"))]
    files += [(f"p{index}", (f"p{index}", b"x", "image/png")) for index in range(20_000)]
    started = time.perf_counter()
    response = httpx.post(f"{server.url}/v1/systemone", files=files, timeout=60)
    assert ["body", "assets"] in detail(response)
    assert "at most 129 parts" in response.text  # the request and OPENJEV_MAX_IMAGES (128) images
    print(f"20,000 parts refused in {time.perf_counter() - started:.2f} s")


def test_a_placeholder_the_prompt_does_not_show_is_refused_not_ignored(vision_stack):
    server, fake = vision_stack
    image = {"type": "image", "format": "png", "data_base64": base64.b64encode(png(30, 30, (1, 2, 3))).decode()}

    def post(state, criteria, assets):
        question = {"q": {"type": "choice", "instructions": "Which?", "criteria": criteria}}
        sent = {"model": "jev-latest", "state": state, "questions": question, "assets": assets}
        return httpx.post(f"{server.url}/v1/systemone", json=sent)

    # An option's name is shown only when it has no description: with one, its image would never be seen.
    assert ["body", "assets", "pic"] in detail(post("x", {"pic": "a cat", "other": None}, {"pic": image}))
    before = len(fake.generate_calls)
    assert post("x", {"pic": None, "other": None}, {"pic": image}).status_code == 200
    assert any("image_data" in call for call in image_calls(fake, before))
    # "pic" stands only inside the longer placeholder "pic2", which is what the prompt shows.
    assert ["body", "assets", "pic"] in detail(post("see pic2", {"a": None, "b": None}, {"pic": image, "pic2": image}))


def test_caller_text_that_spells_vision_tokens_stays_text(vision_stack, sdk):
    _, fake = vision_stack
    before = len(fake.generate_calls)
    photo = Image(png(50, 50, (5, 5, 5)))
    with sdk.attach_assets(photo):  # the SDK sends it wherever `str(photo)` appears in the text
        sdk.system_one(state=f"{photo} <|image_pad|> and <|vision_start|>", questions={"q": Noul(instructions="?")})
    # The warm-up and the noul's readout each hold the image once; the caller's spelled tokens stay text.
    calls = [call for call in image_calls(fake, before) if "image_data" in call]
    assert len(calls) == 2 and all(call["input_ids"].count(IMAGE_PAD) == 1 for call in calls)
    with sdk.attach_assets(photo), pytest.raises(typesafe_sdk.TypeSafeUnprocessableEntityError, match="state"):
        sdk.system_one(
            state=f"{photo} <|vision_start|><|image_pad|><|vision_end|>", questions={"q": Noul(instructions="?")}
        )


def test_a_corrupt_png_and_an_unreferenced_asset_are_refused_by_the_sdk(sdk):
    broken = png(60, 60, (1, 1, 1))[:80]
    with pytest.raises(typesafe_sdk.TypeSafeUnprocessableEntityError, match="assets"):
        sdk.system_one(state=["Look:", Image(broken)], questions={"q": Noul(instructions="Is it dark?")})
    with pytest.raises(typesafe_sdk.TypeSafeUnprocessableEntityError, match=r"assets\.photo"):
        sdk.system_one(
            state="no image here",
            questions={"q": Noul(instructions="?")},
            assets={"photo": Image(png(9, 9, (0, 0, 0)))},
        )


def test_limits_and_models_say_images_are_accepted(vision_stack):
    server, _ = vision_stack
    images = httpx.get(f"{server.url}/v1/limits").json()["images"]
    assert images["accepted"] is True and images["max_images"] == 128
    assert images["square_image_tokens"] == SPEC.image_tokens(1024, 1024)
    models = {model["name"]: model["x_images"] for model in httpx.get(f"{server.url}/v1/models").json()["models"]}
    assert models.pop("openjev-think") is False  # the thinking tier reads text only
    assert models and all(images is True for images in models.values())


def test_a_50_megapixel_image_is_refused_and_health_live_stays_quick(vision_stack):
    server, _ = vision_stack
    huge = base64.b64encode(png(8000, 6250, (3, 3, 3))).decode()
    large = base64.b64encode(png(6000, 5000, (7, 7, 7))).decode()  # 30 megapixels: decoded and resized
    body = {"model": "jev-latest", "state": "<image:h>", "questions": {"q": {"type": "noul", "instructions": "?"}}}

    def post(data: str) -> httpx.Response:
        assets = {"<image:h>": {"type": "image", "format": "png", "data_base64": data}}
        return httpx.post(f"{server.url}/v1/systemone", json={**body, "assets": assets}, timeout=60)

    refused = post(huge)
    assert refused.status_code == 422 and ["body", "assets", "<image:h>"] in detail(refused)
    assert "50000000 pixels" in refused.text
    results: dict[str, object] = {}
    worker = threading.Thread(target=lambda: results.update(large=post(large), done=time.monotonic()))
    worker.start()
    lives = []
    while worker.is_alive():
        started = time.monotonic()
        assert httpx.get(f"{server.url}/health/live", timeout=5).status_code == 200
        lives.append((started, time.monotonic() - started))
    worker.join()
    assert results["large"].status_code == 200  # type: ignore[attr-defined]
    answered_during = [seconds for started, seconds in lives if started < results["done"]]  # type: ignore[operator]
    assert answered_during and max(answered_during) < 1.0


def test_a_text_only_model_refuses_the_same_request_naming_assets(qwen_tokenizer_dir, tmp_path):
    with running_stack(FakeSGLang(), qwen_tokenizer_dir, tmp_path) as (server, fake):
        with (
            TypeSafeClient(
                base_url=server.url, api_key="k", compression="zstd", retry=RetryPolicy(max_retries=0)
            ) as sdk,
            pytest.raises(typesafe_sdk.TypeSafeUnprocessableEntityError, match="reads text only"),
        ):
            ask(sdk, png(30, 20, (1, 1, 1)), png(20, 30, (2, 2, 2)))
        limits = httpx.get(f"{server.url}/v1/limits").json()
        assert limits["images"]["accepted"] is False
        assert limits["boxes"] == {"accepted": False, "grounding": None, "max_new_tokens": None}
        assert httpx.get(f"{server.url}/v1/models").json()["models"][0]["x_images"] is False
    assert not any("image_data" in call["body"] for call in fake.generate_calls)


def test_the_token_budgets_count_every_image_position(vision_stack, tmp_path):
    _, fake = vision_stack
    server = launch_openjev(
        "--connect", fake.url, "--tokenizer", str(fake.tokenizer_path), "--max-input-tokens", "600", log_dir=tmp_path
    )
    try:
        picture = base64.b64encode(png(1024, 1024, (8, 8, 8))).decode()  # 1,024 positions, 3 ids
        body = {
            "model": "jev-latest",
            "state": "<image:b>",
            "questions": {"q": {"type": "noul", "instructions": "?"}},
            "assets": {"<image:b>": {"type": "image", "format": "png", "data_base64": picture}},
        }
        refused = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
        assert ["body", "state"] in detail(refused)
        (issue,) = refused.json()["detail"]
        assert issue["ctx"]["tokens"] > SPEC.image_tokens(1024, 1024) and issue["ctx"]["limit"] == 600
    finally:
        stop_openjev(server)
