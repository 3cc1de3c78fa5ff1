"""Box questions end to end: the official SDK's `Box` against openjev on the fake SGLang in vision mode,
whose box generation writes a known box with known digit logprobs (`tests/fake_sglang/generation.py`)."""

from __future__ import annotations

import base64
import math

import httpx
import pytest
from typesafe_sdk import Box, Choice, Image, Noul, Score

from openjev.prompting.tokenizer import ChatTokenizer
from tests.api.test_images import CRITERIA, png
from tests.fake_sglang.generation import BOX_TEXT, box_logprob


def box_calls(fake, since: int) -> list[dict]:
    return [call["body"] for call in fake.generate_calls[since:] if "regex" in call["body"]["sampling_params"]]


def expected_box(chat: ChatTokenizer, asked: list[int]) -> tuple[dict[str, float], float]:
    """The box and confidence the fake's logprobs give, by hand: the generated ids of `BOX_TEXT`; at each
    digit position the softmax over the ten digit ids `asked`; each number's expected value digit by
    digit; x over 1000 of the width, y over 1000 of the height; confidence exp(-20 * mean spread)."""
    generated = chat.encode(BOX_TEXT)
    numbers, spreads, position = [], [], 0
    for text in BOX_TEXT.removesuffix("]}").split(", "):
        value, variance = 0.0, 0.0
        for place in range(len(text)):
            weights = [math.exp(box_logprob(position, digit_id, generated[position])) for digit_id in asked]
            probabilities = [weight / sum(weights) for weight in weights]
            mean = sum(digit * p for digit, p in enumerate(probabilities))
            value += 10 ** (len(text) - 1 - place) * mean
            variance += 100 ** (len(text) - 1 - place) * sum((d - mean) ** 2 * p for d, p in enumerate(probabilities))
            position += 1
        numbers.append(value / 1000)
        spreads.append(math.sqrt(variance) / 1000)
        position += 2  # the separator ", " (the close ends the last number)
    x1, y1, x2, y2 = numbers
    return {"left": x1, "top": y1, "right": x2, "bottom": y2}, math.exp(-20 * sum(spreads) / 4)


def test_the_sdk_locates_a_box_as_the_fake_s_digit_logprobs_say(vision_stack, sdk, qwen_tokenizer_dir):
    _, fake = vision_stack
    chat = ChatTokenizer(qwen_tokenizer_dir)
    before = len(fake.generate_calls)
    result = sdk.system_one(
        state=["Where is it?", Image(png(320, 240, (30, 160, 40)))], questions={"dog": Box(instructions="The dog")}
    )

    (call,) = box_calls(fake, before)
    digit_ids = [chat.encode(str(digit))[0] for digit in range(10)]
    params = call["sampling_params"]
    assert call["token_ids_logprob"] == digit_ids and len(call["image_data"]) == 1
    assert params["temperature"] == 0 and params["max_new_tokens"] == 4 * 4 + 3 * 2 + 1 + 1
    assert params["regex"].startswith("(0|[1-9][0-9]{0,2}|1000), ")
    assert chat.tokenizer.decode(call["input_ids"][-10:]).endswith('{"bbox_2d": [')

    box, confidence = expected_box(chat, digit_ids)
    answer = result.boxes["dog"]
    assert answer.box.model_dump() == pytest.approx(box, abs=1e-12)
    assert answer.confidence == pytest.approx(confidence, abs=1e-12)
    # Not the greedy digits: the expected values moved off them.
    assert answer.box.left != pytest.approx(0.120, abs=1e-6)
    edges = answer.box
    assert all(0 <= value <= 1 for value in edges.model_dump().values())
    assert edges.left <= edges.right and edges.top <= edges.bottom


def test_a_box_and_three_other_questions_are_answered_with_one_warm_up(vision_stack, sdk, qwen_tokenizer_dir):
    _, fake = vision_stack
    before = len(fake.generate_calls)
    result = sdk.system_one(
        state=["The customer sent this photo:", Image(png(300, 200, (200, 30, 30)))],
        questions={
            "where": Box(instructions="The parcel"),
            "damaged": Noul(instructions="Is the parcel damaged?"),
            "animal": Choice(instructions="Which animal is shown?", criteria=CRITERIA),
            "quality": Score(instructions="How sharp is the photo?", criteria=["blurry", "fair", "sharp"]),
        },
    )
    assert set(result.answers) == {"where", "damaged", "animal", "quality"}
    calls = [call["body"] for call in fake.generate_calls[before:]]
    warm_up = calls[0]["input_ids"]
    others = [call for call in calls[1:] if call["input_ids"][: len(warm_up)] == warm_up]
    # One warm-up of the shared prefix; the box and every readout extend it (the content-free readouts
    # of the choice and the score are the only calls without the state).
    assert sum(call["input_ids"] == warm_up for call in calls) == 1
    assert len(others) == 4 and len(box_calls(fake, before)) == 1
    # Billed: one answer token per readout question, and each id the box's generation wrote.
    box_ids = len(ChatTokenizer(qwen_tokenizer_dir).encode(BOX_TEXT)) + 1
    assert result.usage.output_tokens == 3 + box_ids
    box = result.boxes["where"].box
    assert box.left <= box.right and box.top <= box.bottom


def test_box_questions_need_the_request_s_one_image(vision_stack):
    server, _ = vision_stack
    photo = {"type": "image", "format": "png", "data_base64": base64.b64encode(png(64, 64, (1, 2, 3))).decode()}
    box = {"type": "box", "instructions": "The dog"}
    noul = {"type": "noul", "instructions": "Is it a dog?"}
    cases = [
        ({"model": "jev-latest", "state": "no image here", "questions": {"where": box}}, 0),
        ({"model": "jev-latest", "state": ["<image:a>", "<image:b>"], "questions": {"where": box},
          "assets": {"<image:a>": photo, "<image:b>": photo}}, 2),
    ]  # fmt: skip
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for body, count in cases:
            response = client.post("/v1/systemone", json=body)
            assert response.status_code == 422, response.text
            (issue,) = response.json()["detail"]
            assert issue["loc"] == ["body", "questions", "where"] and f"it has {count}" in issue["msg"]
        # The only image is another question's: the box's generation would not see it.
        other = {**noul, "instructions": ["Is this a dog?", "<image:a>"]}
        elsewhere = {
            "model": "jev-latest",
            "state": "text",
            "assets": {"<image:a>": photo},
            "questions": {"where": box, "is": other},
        }
        response = client.post("/v1/systemone", json=elsewhere)
        assert response.status_code == 422
        assert [issue["loc"] for issue in response.json()["detail"]] == [["body", "questions", "where"]]
        # The thinking tier reads text only: its refusal names the image, before any box is read.
        thinking = {**cases[1][0], "model": "openjev-think", "state": ["<image:a>"], "assets": {"<image:a>": photo}}
        response = client.post("/v1/systemone", json=thinking)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "assets"]
        limits = client.get("/v1/limits").json()["boxes"]
        assert limits == {"accepted": True, "grounding": "relative-1000", "max_new_tokens": 24}


def test_a_generation_that_is_not_a_box_is_a_backend_error(vision_stack):
    server, fake = vision_stack

    def cut_short(answer: dict) -> dict:
        meta = answer["meta_info"]
        if len(answer.get("output_ids", ())) > 1:  # the box's generation: it loses its close
            answer["output_ids"] = answer["output_ids"][:-3]
            meta["output_token_ids_logprobs"] = meta["output_token_ids_logprobs"][:-3]
            meta["finish_reason"] = {"type": "length", "length": len(answer["output_ids"])}
        return answer

    photo = base64.b64encode(png(64, 48, (9, 9, 9))).decode()
    body = {
        "model": "jev-latest",
        "state": ["<image:p>"],
        "questions": {"where": {"type": "box"}},
        "assets": {"<image:p>": {"type": "image", "format": "png", "data_base64": photo}},
    }
    fake.mangle = cut_short
    try:
        response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
    finally:
        fake.mangle = None
    assert response.status_code == 502
    assert response.json()["detail"]["error_type"] == "backend_error"
