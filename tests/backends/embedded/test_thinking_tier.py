"""The issue's "done when", end to end: `openjev serve` on the embedded backend (the packaged 0.5B
test model: the same Qwen2.5-Coder family and chat template as the 1.5B default, a few times faster
to decode) with OPENJEV_THINK_MARGIN=1000, OPENJEV_THINK_MAX_SHARE=1, OPENJEV_THINK_BUDGET_TOKENS=24."""

import httpx
import pytest

from tests.conftest import launch_openjev, stop_openjev

pytestmark = pytest.mark.embedded

QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    "topic": {
        "type": "choice",
        "instructions": "What is the message about?",
        "criteria": {"billing": None, "shipping": None, "warranty": None},
    },
}
STATE = "I was charged twice for order #4411, two identical payments of 249 dollars. Please refund one."


@pytest.fixture(scope="module")
def thinking_server(test_model, tmp_path_factory):
    env = {
        "OPENJEV_LOCAL_MODEL": str(test_model.path),
        "OPENJEV_THINK_MARGIN": "1000",
        "OPENJEV_THINK_MAX_SHARE": "1",
        "OPENJEV_THINK_BUDGET_TOKENS": "24",
        "OPENJEV_REQUEST_TIMEOUT": "900",
        "OPENJEV_OPTION_SHIFTS": "1",  # one readout and one thought per question: the counts below
    }
    server = launch_openjev(log_dir=tmp_path_factory.mktemp("logs"), timeout=900, env=env)
    yield server
    stop_openjev(server)


# Two 24-token generations of the 0.5B model take about a minute on 2 idle cores; far longer on busy ones.
@pytest.mark.timeout(1800)
def test_done_when(thinking_server):
    url = thinking_server.url
    names = [model["name"] for model in httpx.get(f"{url}/v1/models").json()["models"]]
    assert "openjev-think" in names and "jev-latest" in names
    thinking = httpx.get(f"{url}/v1/limits").json()["thinking"]
    assert thinking["mode"] == "prompted" and thinking["budget_tokens"] == 24  # Qwen2.5 has no thinking switch

    think = httpx.post(
        f"{url}/v1/systemone", json={"model": "openjev-think", "state": STATE, "questions": QUESTIONS}, timeout=900
    )
    assert think.status_code == 200, think.text
    assert think.headers["x-openjev-escalated"] == "2"
    reasoning = int(think.headers["x-openjev-reasoning-tokens"])
    assert 0 < reasoning <= 48
    assert think.json()["usage"]["output_tokens"] == 2 + reasoning  # one answer per question, and the thoughts
    assert think.json()["model"] == "openjev-think"
    assert set(think.json()["answers"]) == set(QUESTIONS)

    plain = httpx.post(
        f"{url}/v1/systemone", json={"model": "jev-latest", "state": STATE, "questions": QUESTIONS}, timeout=900
    )
    assert plain.status_code == 200
    assert "x-openjev-escalated" not in plain.headers and "x-openjev-reasoning-tokens" not in plain.headers
    assert plain.json()["usage"]["output_tokens"] == 2 and plain.headers["x-openjev-backend-output-tokens"] == "3"

    metrics = httpx.get(f"{url}/metrics").text
    assert "openjev_escalations_total 2.0" in metrics
    assert f"openjev_reasoning_tokens_total {float(reasoning)}" in metrics
