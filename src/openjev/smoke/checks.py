"""The smoke checks. Each takes a `Probe`, returns a one-line summary, or raises `CheckFailed` /
`CheckSkipped`; `CHECKS` lists them in the order they run."""

from __future__ import annotations

import base64
import copy
import io
from collections.abc import Callable
from typing import Any

import httpx
from PIL import Image

from openjev.request.decision_schema import OPENAI_MODEL
from openjev.smoke.probe import (
    DECISIONS,
    SUPPORT_TICKET,
    CheckFailed,
    CheckSkipped,
    Probe,
    answers_of,
    describe_error,
    error_detail,
    read_choice,
    read_score,
    read_unit,
)


def _ticket_sanity(refund: float, department: str) -> str:
    if refund <= 0.5:
        raise CheckFailed(f"semantic sanity: refund = {refund:.3f}, but the user plainly asks for a refund")
    if department != "billing":
        raise CheckFailed(f"semantic sanity: department = {department!r}, but a double charge is for billing")
    return f"refund {refund:.3f}, department billing"


def check_example(probe: Probe) -> str:
    body = {**SUPPORT_TICKET, "model": probe.model}
    answers = answers_of(probe.post(body), body["questions"])
    questions = body["questions"]
    refund = read_unit("refund", answers["refund"].get("noul"))
    read_choice("department", answers["department"], list(questions["department"]["criteria"]))
    urgency = read_score("urgency", answers["urgency"], questions["urgency"]["criteria"])
    return f"{_ticket_sanity(refund, answers['department']['choice'])}, urgency {urgency:.2f}"


def _topics(count: int) -> dict[str, str]:
    return {f"topic-{index:03d}": f"Questions about product line number {index}" for index in range(count)}


def check_choice_255(probe: Probe) -> str:
    options = _topics(255)
    questions = {"topic": {"type": "choice", "instructions": "Which product line is this about?", "criteria": options}}
    answers = answers_of(probe.post(probe.request(questions, "My product line 42 device broke.")), questions)
    read_choice("topic", answers["topic"], list(options))
    return f"255 options answered, choice {answers['topic']['choice']}"


def _expect_422(response: httpx.Response, what: str) -> str:
    if response.status_code != 422:
        raise CheckFailed(f"{what} must be rejected with 422, got {describe_error(response)}")
    detail = error_detail(response)
    if not isinstance(detail, list) or not detail:
        raise CheckFailed(f"a 422 must carry a list of validation errors, got {detail!r}")
    return f"rejected: {detail[0].get('msg')}"


def check_choice_256_rejected(probe: Probe) -> str:
    questions = {"topic": {"type": "choice", "criteria": _topics(256)}}
    return _expect_422(probe.post(probe.request(questions)), "a choice with 256 options")


def check_questions_201_rejected(probe: Probe) -> str:
    questions = {f"q{index}": {"type": "noul", "instructions": f"Is {index} even?"} for index in range(201)}
    return _expect_422(probe.post(probe.request(questions)), "a request with 201 questions")


SCORE_LEVELS = [f"{level}: {'very ' * (level // 3)}{'calm' if level < 5 else 'angry'}" for level in range(10)]


def check_score_10(probe: Probe) -> str:
    questions = {"anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": SCORE_LEVELS}}
    answers = answers_of(
        probe.post(probe.request(questions, "This is the third time the app lost my work!")), questions
    )
    return f"score {read_score('anger', answers['anger'], SCORE_LEVELS):.2f} over 10 levels"


def check_sdk(probe: Probe) -> str:
    try:
        import typesafe_sdk
    except ImportError as error:
        raise CheckSkipped("typesafe-sdk is not installed (pip install 'typesafe-sdk[zstd]')") from error
    # Options make the body larger than 1 KiB, so the SDK compresses it.
    questions = {
        **copy.deepcopy(SUPPORT_TICKET["questions"]),
        "topic": {"type": "choice", "instructions": "Which product line?", "criteria": _topics(26)},
    }
    try:
        client = typesafe_sdk.TypeSafeClient(
            base_url=probe.url, api_key=probe.api_key or "unused", model=probe.model,
            compression="zstd", timeout=probe.request_timeout,
        )  # fmt: skip
        compression = "zstd"
    except typesafe_sdk.TypeSafeError:  # zstd unavailable on this Python: still check parsing
        client = typesafe_sdk.TypeSafeClient(
            base_url=probe.url, api_key=probe.api_key or "unused", model=probe.model,
            compression=False, timeout=probe.request_timeout,
        )  # fmt: skip
        compression = "uncompressed (zstd unavailable here)"
    with client:
        try:
            result = client.system_one(state=SUPPORT_TICKET["state"], questions=questions)
        except typesafe_sdk.TypeSafeError as error:
            raise CheckFailed(f"the SDK failed: {type(error).__name__}: {error}") from error
    if not isinstance(result, typesafe_sdk.SystemOneResponse):
        raise CheckFailed(f"the SDK returned {type(result).__name__}")
    refund = read_unit("refund", result.nouls["refund"].noul)
    topic = result.choices["topic"].choice
    if topic not in questions["topic"]["criteria"]:
        raise CheckFailed(f"the SDK parsed choice {topic!r}, not one of the options")
    read_unit("urgency confidence", result.scores["urgency"].confidence)
    return f"parsed by typesafe-sdk {typesafe_sdk.__version__} ({compression}); " + _ticket_sanity(
        refund, result.choices["department"].choice
    )


def decision_request() -> dict[str, Any]:
    """The support-ticket example as OpenAI's Decisions API asks it."""
    questions = SUPPORT_TICKET["questions"]
    department = questions["department"]
    return {
        "model": OPENAI_MODEL,
        "input": SUPPORT_TICKET["state"],
        "questions": [
            {"type": "predicate", "name": "refund", "instructions": questions["refund"]["instructions"]},
            {
                "type": "choice",
                "name": "department",
                "instructions": department["instructions"],
                "choices": [{"value": name, "description": text} for name, text in department["criteria"].items()],
            },
            {
                "type": "score",
                "name": "urgency",
                "instructions": questions["urgency"]["instructions"],
                "levels": [{"label": label} for label in questions["urgency"]["criteria"]],
            },
        ],
    }


def check_decisions(probe: Probe) -> str:
    """The example through OpenAI's Decisions API (`/v1/decisions`): answers in order with their names,
    parsed by the `openai` SDK's own `Decision` model where it is installed, and the same sense."""
    body = decision_request()
    response = probe.post(body, path=DECISIONS)
    if response.status_code != 200:
        raise CheckFailed(f"expected 200, got {describe_error(response)}")
    decision = response.json()
    answers = decision.get("answers")
    asked = [(question["type"], question["name"]) for question in body["questions"]]
    if not isinstance(answers, list) or [(a.get("type"), a.get("name")) for a in answers] != asked:
        raise CheckFailed(f"answers must be {asked} in order, got {str(answers)[:300]}")
    refund, department, urgency = answers
    values = [choice["value"] for choice in body["questions"][1]["choices"]]
    probabilities = {p.get("value"): p.get("probability") for p in department.get("probabilities") or []}
    read_choice("department", {**department, "probabilities": probabilities}, values)
    labels = [level["label"] for level in body["questions"][2]["levels"]]
    levels = urgency.get("probabilities") or []
    if [(p.get("value"), p.get("label")) for p in levels] != list(enumerate(labels)):
        raise CheckFailed(f"urgency: levels must be {list(enumerate(labels))} with their labels, got {levels}")
    legend = {str(index): label for index, label in enumerate(labels)}
    score = read_score(
        "urgency", {**urgency, "legend": legend, "probabilities": {str(p["value"]): p["probability"] for p in levels}},
        labels,
    )  # fmt: skip
    usage = decision.get("usage") or {}
    if usage.get("total_tokens") != usage.get("input_tokens", 0) + usage.get("output_tokens", 0):
        raise CheckFailed(f"usage must add up: {usage}")
    try:
        from openai.types.decision import Decision
    except ImportError:
        parsed = ""
    else:
        Decision.model_validate(decision)
        parsed = "parsed by openai's Decision; "
    sanity = _ticket_sanity(read_unit("refund", refund.get("probability")), department.get("choice"))
    return f"{parsed}{sanity}, urgency {score:.2f}"


def check_auth(probe: Probe) -> str:
    if not probe.api_key:
        raise CheckSkipped("no API key given")
    body = {**SUPPORT_TICKET, "model": probe.model}
    for what, headers in (("no key", {}), ("a wrong key", {"Authorization": "Bearer wrong-" + probe.api_key})):
        response = probe.post(body, headers=headers)
        detail = error_detail(response)
        if (
            response.status_code != 401
            or not isinstance(detail, dict)
            or detail.get("error_type") != "authentication_error"
        ):
            raise CheckFailed(f"a request with {what} must get 401 authentication_error: {describe_error(response)}")
    return "401 without a key and with a wrong key"


def _picture(color: tuple[int, int, int]) -> str:
    out = io.BytesIO()
    Image.new("RGB", (128, 128), color).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def check_images(probe: Probe) -> str:
    """With `/v1/limits` saying images are accepted: one noul question about two generated pictures
    (a red square, a blue one) as JSON `data_base64` assets; the answers must differ (a server that
    drops the image answers both alike)."""
    limits = probe.client.get("/v1/limits", headers=probe.auth_headers())
    images = limits.json().get("images") if limits.status_code == 200 else None
    if not isinstance(images, dict) or images.get("accepted") is not True:
        raise CheckSkipped("/v1/limits does not say images are accepted")
    questions = {"red": {"type": "noul", "instructions": "Is the picture mostly red?"}}
    found = {}
    for name, color in (("red", (220, 20, 20)), ("blue", (20, 20, 220))):
        body = probe.request(questions, ["The picture:", "<image:smoke>"])
        body["assets"] = {"<image:smoke>": {"type": "image", "format": "png", "data_base64": _picture(color)}}
        found[name] = read_unit(name, answers_of(probe.post(body), questions)["red"].get("noul"))
    if found["red"] == found["blue"]:
        raise CheckFailed(f"a red and a blue picture got the same answer ({found['red']:.6f}): the image was not seen")
    return f"mostly red? red picture {found['red']:.3f}, blue picture {found['blue']:.3f}"


CHECKS: list[tuple[str, Callable[[Probe], str]]] = [
    ("example", check_example),
    ("choice_255", check_choice_255),
    ("choice_256_rejected", check_choice_256_rejected),
    ("questions_201_rejected", check_questions_201_rejected),
    ("score_10", check_score_10),
    ("sdk", check_sdk),
    ("decisions", check_decisions),
    ("images", check_images),
    ("auth", check_auth),
]
