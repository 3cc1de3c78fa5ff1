"""openjev's own cost per request, side by side with a floor, against an instant backend.

Three processes: an instant SGLang stand-in (a bare uvloop HTTP/1.1 server that answers `/generate`
with the requested ids' logprobs, no model, no framework), `openjev serve --connect` to it, and the
*floor*: a bare uvicorn app that parses the same JSON body and makes the same backend calls (a
warm-up, then N concurrent `/generate` calls with `input_ids` of the same lengths as openjev's) over
one pooled httpx client, then answers. The floor does no validation, rendering, tokenization or
readout, so openjev / floor is what openjev's own work costs on top of unavoidable HTTP and JSON.

Requests alternate between openjev and the floor (same body, one keep-alive connection each), so
both see the same machine noise. Printed per case: p50 of each and the ratio, ratios first.

    uv run python benchmarks/sidecar_overhead.py [--scale 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openjev.backends.supervised import free_port
from tests.conftest import fetch_qwen_tokenizer, launch_openjev, stop_openjev, wait_for

SYSTEM = {"role": "system", "content": "You are a support assistant."}
TICKET = {"role": "user", "content": "I was charged twice for my subscription this month. Please refund the duplicate."}
QUESTIONS = [
    {"type": "noul", "instructions": "Does the user request a refund?"},
    {
        "type": "choice",
        "instructions": "Which department should handle this?",
        "criteria": {"billing": "Payments and refunds", "technical": "Software bugs", "sales": None},
    },
    {"type": "score", "instructions": "How urgent is the request?", "criteria": ["Routine", "Urgent", "Emergency"]},
]
# What openjev reads from SGLang at start-up (the 0.5.19 Python frontend's fields), for Qwen3's vocabulary.
SERVER_FACTS = {
    b"/model_info": {"model_path": "Qwen/Qwen3", "vocab_size": 151936},
    b"/server_info": {"max_req_input_len": 262144, "max_total_num_tokens": 1 << 20},
    b"/v1/models": {"data": [{"id": "Qwen/Qwen3", "max_model_len": 262150}]},
}
WORDS = [
    "the",
    "a",
    "report",
    "customer",
    "order",
    "refund",
    "shipping",
    "delay",
    "invoice",
    "account",
    "payment",
    "server",
    "error",
    "log",
]


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One keep-alive connection: start-up facts on their routes, an SGLang-shaped readout for anything else."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = json.loads(await reader.readexactly(length)) if length else {}
        ids = body.get("token_ids_logprob") or []
        path = head.split(b" ", 2)[1]
        payload = json.dumps(
            SERVER_FACTS[path]
            if path in SERVER_FACTS
            else {
                "text": "",
                "output_ids": ids[:1],
                "meta_info": {
                    "id": body.get("rid"),
                    "finish_reason": {"type": "length", "length": 1},
                    "prompt_tokens": len(body.get("input_ids") or []),
                    "cached_tokens": 0,
                    "output_token_ids_logprobs": [[[-1.0 - i, token, None] for i, token in enumerate(ids)]],
                },
            }
        ).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(payload))
        writer.write(payload)
        await writer.drain()
    writer.close()


def instant_backend(port: int) -> None:
    import uvloop

    async def serve() -> None:
        server = await asyncio.start_server(_answer, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    uvloop.run(serve())


def floor_server(port: int, backend_port: int) -> None:
    """The floor: parse the body, make the same backend calls, answer. `x-floor-lengths` carries the
    prompt lengths (warm-up first) that openjev sent for the same body."""
    import uvicorn

    client = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{backend_port}", limits=httpx.Limits(max_connections=64), timeout=60
    )

    async def call(length: int) -> Any:
        payload = {
            "input_ids": [1] * length,
            "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True,
            "logprob_start_len": -1,
            "token_ids_logprob": [1, 2, 3],
        }
        return (await client.post("/generate", json=payload)).json()

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.loads(b"".join(chunks) or b"{}")
        headers = dict(scope["headers"])
        lengths = [int(n) for n in headers.get(b"x-floor-lengths", b"1").split(b",")]
        await call(lengths[0])
        answers = await asyncio.gather(*(call(length) for length in lengths[1:]))
        out = json.dumps({"questions": list(body.get("questions", {})), "answers": answers}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": out})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop")


def chat_body(state: Any, count: int) -> dict[str, Any]:
    return {"model": "jev-latest", "state": state, "questions": {f"q{i}": QUESTIONS[i % 3] for i in range(count)}}


def document(tokens: int, seed: int = 7) -> str:
    """About `tokens` tokens of plain text in paragraphs (one word is about one token here)."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) + "." for _ in range(tokens // 18)]
    return "\n".join(lines)


def cases(scale: float) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    def n(count: int) -> int:
        return max(5, int(count * scale))

    small = [SYSTEM, TICKET]
    yield "3 questions, small chat", [chat_body(small, 3)] * n(200)
    yield "64 questions, small chat", [chat_body(small, 64)] * n(40)
    doc = document(24_000)
    yield (
        "8 questions, ~24k-token state, new each time",
        [chat_body(f"Case {uuid.uuid4().hex}\n{doc}", 8) for _ in range(n(20))],
    )
    yield "8 questions, the same ~24k-token state again", [chat_body(f"Case fixed\n{doc}", 8)] * n(20)
    conversation = [SYSTEM] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i}: {document(60, seed=i)}"}
        for i in range(40)
    ]
    grown = []
    for i in range(n(40)):
        role = "user" if (len(conversation) + i) % 2 else "assistant"
        conversation = [*conversation, {"role": role, "content": f"Message {40 + i}: {document(60, seed=99 + i)}"}]
        grown.append(chat_body(conversation, 3))
    yield "3 questions, a 40-message chat grown by one message", grown


def backend_lengths(response: httpx.Response, count: int) -> str:
    """Warm-up and branch prompt lengths of openjev's calls, from its headers and usage."""
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    branches = response.json()["usage"]["input_tokens"] - prefix
    return ",".join([str(prefix)] + [str(branches // count)] * count)


def run_case(openjev: httpx.Client, floor: httpx.Client, bodies: list[dict[str, Any]]) -> tuple[float, float]:
    ours, theirs = [], []
    for index, body in enumerate([bodies[0], *bodies]):  # the first request warms both up
        started = time.perf_counter()
        response = openjev.post("/v1/systemone", json=body)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        lengths = backend_lengths(response, len(body["questions"]))
        started = time.perf_counter()
        floor.post("/", json=body, headers={"x-floor-lengths": lengths}).raise_for_status()
        if index:
            ours.append(elapsed)
            theirs.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's request count")
    args = parser.parse_args()
    backend_port, floor_port = free_port(), free_port()
    helpers = [
        multiprocessing.Process(target=instant_backend, args=(backend_port,), daemon=True),
        multiprocessing.Process(target=floor_server, args=(floor_port, backend_port), daemon=True),
    ]
    for process in helpers:
        process.start()
    try:
        wait_for(f"http://127.0.0.1:{backend_port}/health", timeout=30)
        wait_for(f"http://127.0.0.1:{floor_port}/", timeout=30)
        with tempfile.TemporaryDirectory() as logs:
            server = launch_openjev(
                "--connect", f"http://127.0.0.1:{backend_port}", "--tokenizer", str(fetch_qwen_tokenizer()),
                log_dir=Path(logs), env={"OPENJEV_LOG_LEVEL": "warning"},
            )  # fmt: skip
            try:
                with (
                    httpx.Client(base_url=server.url, timeout=120) as openjev,
                    httpx.Client(base_url=f"http://127.0.0.1:{floor_port}", timeout=120) as floor,
                ):
                    print(f"{'case':<52} {'ratio':>6} {'openjev p50':>12} {'floor p50':>10}")
                    for name, bodies in cases(args.scale):
                        ours, theirs = run_case(openjev, floor, bodies)
                        print(f"{name:<52} {ours / theirs:6.2f} {ours * 1000:9.1f} ms {theirs * 1000:7.1f} ms")
            finally:
                stop_openjev(server)
    finally:
        for process in helpers:
            process.terminate()
            process.join()


if __name__ == "__main__":
    main()
