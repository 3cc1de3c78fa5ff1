"""`openjev serve` with `OPENJEV_LOCAL_MODEL` naming a vision-language directory (the tiny Qwen2.5-VL of
`tiny_vision.py`), over real HTTP: the checkpoint loads as an image-text-to-text model with its own
processor and answers text requests through the same prefix reuse. Its weights are random, so the test
checks mechanics (a valid distribution, the warm-up reused by every branch, the same answers again),
never the answers' content. Requests with images are the images wire's (`tests/api/test_images.py`).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from openjev.examples import support_ticket
from tests.conftest import ServeOpenJev, eventually

pytestmark = pytest.mark.embedded


def test_a_vision_checkpoint_serves_text_requests(serve_openjev: ServeOpenJev, tiny_qwen2_5_vl: Path) -> None:
    server = serve_openjev(env={"OPENJEV_LOCAL_MODEL": str(tiny_qwen2_5_vl)}, timeout=300)
    response = httpx.post(f"{server.url}/v1/systemone", json=support_ticket(), timeout=120)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "tiny-qwen2.5-vl"
    department = body["answers"]["department"]
    assert abs(sum(department["probabilities"].values()) - 1) < 1e-6
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    assert int(response.headers["x-openjev-cached-tokens"]) >= len(support_ticket()["questions"]) * prefix
    again = httpx.post(f"{server.url}/v1/systemone", json=support_ticket(), timeout=120).json()
    assert again["answers"] == body["answers"]

    # `/health` shares one backend probe for a second (`api/probe.py`): its counters may lag by that much.
    def backend() -> dict:
        return httpx.get(f"{server.url}/health").json()["backend"]

    assert backend()["model"] == "tiny-qwen2.5-vl"
    assert eventually(lambda: backend()["prefix_cache"]["hits"] >= len(support_ticket()["questions"]), 5)
