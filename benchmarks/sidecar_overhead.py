"""Measure openjev's own cost per request against an instant backend.

Starts an instant SGLang stand-in (a bare uvloop HTTP/1.1 server that answers `/generate` with the
requested ids' logprobs, without any model or framework work) and `openjev serve --connect` as
separate processes, then sends sequential requests over one keep-alive connection and prints
p50/p99 wall time per request for 3 and 64 questions. Nearly everything measured is openjev's work
plus loopback HTTP: validation, rendering, tokenization, N+1 backend calls and readout.

    uv run python benchmarks/sidecar_overhead.py [--requests 200]
"""

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openjev.backends.supervised import free_port
from tests.conftest import fetch_qwen_tokenizer, launch_openjev, stop_openjev, wait_for

STATE = [
    {"role": "system", "content": "You are a support assistant."},
    {"role": "user", "content": "I was charged twice for my subscription this month. Please refund the duplicate."},
]
QUESTIONS = [
    {"type": "noul", "instructions": "Does the user request a refund?"},
    {
        "type": "choice",
        "instructions": "Which department should handle this?",
        "criteria": {"billing": "Payments and refunds", "technical": "Software bugs", "sales": None},
    },
    {"type": "score", "instructions": "How urgent is the request?", "criteria": ["Routine", "Urgent", "Emergency"]},
]


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One keep-alive connection: every POST gets a minimal SGLang-shaped answer, anything else 200."""
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
        payload = json.dumps(
            {
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


def request_body(count: int) -> dict:
    return {
        "model": "jev-latest",
        "state": STATE,
        "questions": {f"q{i}": QUESTIONS[i % len(QUESTIONS)] for i in range(count)},
    }


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(client: httpx.Client, count: int, requests: int) -> tuple[float, float, float]:
    body = request_body(count)
    for _ in range(10):
        client.post("/v1/systemone", json=body).raise_for_status()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        client.post("/v1/systemone", json=body).raise_for_status()
        samples.append(time.perf_counter() - started)
    return percentile(samples, 0.5), percentile(samples, 0.99), statistics.fmean(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    backend = multiprocessing.Process(target=instant_backend, args=(port,), daemon=True)
    backend.start()
    try:
        wait_for(f"http://127.0.0.1:{port}/health", timeout=30)
        with tempfile.TemporaryDirectory() as logs:
            server = launch_openjev(
                "--connect", f"http://127.0.0.1:{port}", "--tokenizer", str(fetch_qwen_tokenizer()),
                log_dir=Path(logs), env={"OPENJEV_LOG_LEVEL": "warning"},
            )  # fmt: skip
            try:
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    print(f"openjev overhead against an instant backend, {args.requests} sequential requests")
                    for count in (3, 64):
                        p50, p99, mean = measure(client, count, args.requests)
                        print(
                            f"{count:>3} questions ({count + 1} backend calls): "
                            f"p50 {p50 * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms   mean {mean * 1000:7.2f} ms"
                        )
            finally:
                stop_openjev(server)
    finally:
        backend.terminate()
        backend.join()


if __name__ == "__main__":
    main()
