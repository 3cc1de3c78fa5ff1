"""openjev's own cost per request, side by side with a floor, against an instant backend.

Three processes: an instant SGLang stand-in (a bare uvloop HTTP/1.1 server that answers `/generate`
with the requested ids' logprobs, no model, no framework), `openjev serve --connect` to it, and the
*floor*: a bare uvicorn app that parses the same JSON body and makes the same backend calls (a
warm-up, then one list-form `/generate` of N readouts, as openjev sends its branches, with
`input_ids` of the same lengths and about the same bytes as openjev's) over one pooled httpx client,
then answers, with orjson for every JSON it reads or writes. The floor does no validation,
rendering, tokenization or readout, so openjev / floor is what openjev's own work costs on top of
unavoidable HTTP and JSON.

A "new" state is a seeded random text per request, new all the way through, so no piece of it was
tokenized before. The growing conversations (50, 400 and 1,100 messages) add one new message per
request; for them openjev's own preparation time (its `Server-Timing` `prep`) is printed too.

Requests alternate between openjev and the floor (same body, one keep-alive connection each), so
both see the same machine noise. Printed per case: the ratio of p50s, the median of the per-body
ratios ("paired"), p50 of each, and p50 prep.

A second table puts OpenAI's `/v1/decisions` beside `/v1/systemone` on the same openjev: the same
state and questions in each contract's shape (the same prompts reach the backend), alternating, with
the same figures; the goal is at most 5% more for `/v1/decisions`.

    uv run python benchmarks/sidecar_overhead.py [--scale 1.0] [--decisions-only]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

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
JSON_HEADERS = {"content-type": "application/json"}
READOUT = {"max_new_tokens": 1, "temperature": 0}
#: The id the floor sends: four digits, so its prompts take the bytes openjev's do (4.7 to 5.0 bytes an
#: id on these texts), and the backend parses as much.
FLOOR_ID = 1000
GROWN_SIZES = (50, 400, 1_100)


def _readout(rid: Any, ids: list[int], prompt: list[int] | None) -> dict[str, Any]:
    """One readout's answer in SGLang's shape: the requested ids' logprobs."""
    return {
        "text": "",
        "output_ids": ids[:1],
        "meta_info": {
            "id": rid,
            "finish_reason": {"type": "length", "length": 1},
            "prompt_tokens": len(prompt or []),
            "cached_tokens": 0,
            "output_token_ids_logprobs": [[[-1.0 - i, token, None] for i, token in enumerate(ids)]],
        },
    }


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
        body = orjson.loads(await reader.readexactly(length)) if length else {}
        path = head.split(b" ", 2)[1]
        if path in SERVER_FACTS:
            payload = orjson.dumps(SERVER_FACTS[path])
        elif isinstance(body.get("rid"), list):  # the list form: one answer per readout, in order
            payload = orjson.dumps(
                [
                    _readout(rid, ids, prompt)
                    for rid, ids, prompt in zip(body["rid"], body["token_ids_logprob"], body["input_ids"], strict=True)
                ]
            )
        else:
            payload = orjson.dumps(
                _readout(body.get("rid"), body.get("token_ids_logprob") or [], body.get("input_ids"))
            )
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

    async def call(lengths: list[int]) -> Any:
        """One `/generate` of one readout per length: a single readout alone, several in the list form."""
        one = len(lengths) == 1
        payload = {
            "rid": "r" if one else [f"r{i}" for i in range(len(lengths))],
            "input_ids": [FLOOR_ID] * lengths[0] if one else [[FLOOR_ID] * length for length in lengths],
            "sampling_params": READOUT if one else [READOUT] * len(lengths),
            "return_logprob": True,
            "logprob_start_len": -1,
            "token_ids_logprob": [1, 2, 3] if one else [[1, 2, 3]] * len(lengths),
        }
        response = await client.post("/generate", content=orjson.dumps(payload), headers=JSON_HEADERS)
        return orjson.loads(response.content)

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = orjson.loads(b"".join(chunks) or b"{}")
        headers = dict(scope["headers"])
        lengths = [int(n) for n in headers.get(b"x-floor-lengths", b"1").split(b",")]
        await call(lengths[:1])
        # The branches as one list-form `/generate`, as openjev sends them.
        answers = await call(lengths[1:])
        out = orjson.dumps({"questions": list(body.get("questions", {})), "answers": answers})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": out})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop")


def chat_body(state: Any, count: int) -> dict[str, Any]:
    return {"model": "jev-latest", "state": state, "questions": {f"q{i}": QUESTIONS[i % 3] for i in range(count)}}


def document(tokens: int, seed: int = 7) -> str:
    """About `tokens` tokens of plain text in paragraphs (one word is about one token here), random
    throughout for each seed."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) + "." for _ in range(tokens // 18)]
    return "\n".join(lines)


def message(index: int) -> dict[str, Any]:
    """Message `index` of a conversation: a user or assistant turn of 6 to 20 random words."""
    rng = random.Random(1_000_003 * index)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
    return {"role": "user" if index % 2 == 0 else "assistant", "content": f"Message {index}: {words}."}


def grown(size: int, requests: int) -> list[dict[str, Any]]:
    """A conversation of `size` messages, then one new message per request: the first request
    (warm-up) shows `size` messages, each later one the same ones plus one more."""
    conversation = [SYSTEM, *(message(i) for i in range(size - 1))]
    bodies = [chat_body(conversation, 3)]
    for i in range(requests):
        conversation = [*conversation, message(size - 1 + i)]
        bodies.append(chat_body(conversation, 3))
    return bodies


def cases(scale: float) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Each case's bodies; the first one warms both servers up and is not counted."""

    def n(count: int) -> int:
        return max(5, int(count * scale))

    small = [SYSTEM, TICKET]
    yield "3 questions, small chat", [chat_body(small, 3)] * (n(200) + 1)
    yield "64 questions, small chat", [chat_body(small, 64)] * (n(40) + 1)
    yield (
        "8 questions, ~24k-token state, new each time",
        [chat_body(document(24_000, seed=seed), 8) for seed in range(n(20) + 1)],
    )
    same = chat_body(document(24_000, seed=-1), 8)
    yield "8 questions, the same ~24k-token state again", [same] * (n(20) + 1)
    for size in GROWN_SIZES:
        yield f"3 questions, {size:,}-message chat + 1 new message", grown(size, n(40))


def decision_body(body: dict[str, Any]) -> dict[str, Any]:
    """`body` in OpenAI's Decisions shape: the same state and questions, so the same prompts."""
    questions = []
    for question in body["questions"].values():
        if question["type"] == "noul":
            questions.append({"type": "predicate", "instructions": question["instructions"]})
        elif question["type"] == "choice":
            choices = [
                {"value": name} if text is None else {"value": name, "description": text}
                for name, text in question["criteria"].items()
            ]
            questions.append({"type": "choice", "instructions": question["instructions"], "choices": choices})
        else:
            levels = [{"label": label} for label in question["criteria"]]
            questions.append({"type": "score", "instructions": question["instructions"], "levels": levels})
    state = body["state"]
    return {"model": "gpt-6-luna", "input": state, "questions": questions}


#: The cases of `cases` asked through both contracts.
DECISION_CASES = ("3 questions, small chat", "64 questions, small chat", "8 questions, the same ~24k-token state again")


def decision_cases(scale: float) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    return ((name, bodies) for name, bodies in cases(scale) if name in DECISION_CASES)


def run_decisions_case(openjev: httpx.Client, bodies: list[dict[str, Any]]) -> tuple[float, float, float]:
    """p50 seconds of `/v1/decisions` and of `/v1/systemone` for the same bodies, and the median of the
    per-body ratios; bodies[0] only warms up."""
    decisions, systemone = [], []
    for index, body in enumerate(bodies):
        times = []
        for path, content in (
            ("/v1/decisions", orjson.dumps(decision_body(body))),
            ("/v1/systemone", orjson.dumps(body)),
        ):
            started = time.perf_counter()
            openjev.post(path, content=content, headers=JSON_HEADERS).raise_for_status()
            times.append(time.perf_counter() - started)
        if index:
            decisions.append(times[0])
            systemone.append(times[1])
    paired = statistics.median(a / b for a, b in zip(decisions, systemone, strict=True))
    return statistics.median(decisions), statistics.median(systemone), paired


def backend_lengths(response: httpx.Response, count: int) -> str:
    """Warm-up and branch prompt lengths of openjev's calls, from its headers."""
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    branches = int(response.headers["x-openjev-backend-input-tokens"]) - prefix
    return ",".join([str(prefix)] + [str(branches // count)] * count)


def prep_seconds(response: httpx.Response) -> float:
    """openjev's own preparation time, from its `Server-Timing: prep;dur=<ms>, ...` header."""
    first = response.headers["server-timing"].split(",")[0]
    return float(first.split("dur=")[1]) / 1000


def run_case(
    openjev: httpx.Client, floor: httpx.Client, bodies: list[dict[str, Any]]
) -> tuple[float, float, float, float]:
    """p50 seconds of openjev, of the floor, and of openjev's preparation, and the median of the
    per-body ratios (each body's two requests are next to each other in time, so this figure moves
    less with the machine's noise than the ratio of p50s); bodies[0] only warms up."""
    ours, theirs, preps = [], [], []
    for index, body in enumerate(bodies):
        content = orjson.dumps(body)
        started = time.perf_counter()
        response = openjev.post("/v1/systemone", content=content, headers=JSON_HEADERS)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        headers = {**JSON_HEADERS, "x-floor-lengths": backend_lengths(response, len(body["questions"]))}
        started = time.perf_counter()
        floor.post("/", content=content, headers=headers).raise_for_status()
        if index:
            ours.append(elapsed)
            theirs.append(time.perf_counter() - started)
            preps.append(prep_seconds(response))
    paired = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
    return statistics.median(ours), statistics.median(theirs), statistics.median(preps), paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's request count")
    parser.add_argument("--decisions-only", action="store_true", help="only the /v1/decisions table")
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
                    print(
                        f"{'case':<52} {'ratio':>6} {'paired':>6} {'openjev p50':>12} {'floor p50':>10} {'prep p50':>9}"
                    )
                    preps = []
                    for name, bodies in [] if args.decisions_only else cases(args.scale):
                        ours, theirs, prep, paired = run_case(openjev, floor, bodies)
                        preps.append(prep)
                        print(
                            f"{name:<52} {ours / theirs:6.2f} {paired:6.2f} {ours * 1000:9.1f} ms "
                            f"{theirs * 1000:7.1f} ms {prep * 1000:6.1f} ms",
                            flush=True,
                        )
                    grown_preps = preps[-len(GROWN_SIZES) :] or [1.0]
                    print(
                        f"preparation with one new message, {GROWN_SIZES[-1]:,} against {GROWN_SIZES[0]} messages: "
                        f"{grown_preps[-1] / grown_preps[0]:.2f}x"
                    )
                    print(f"\n{'case':<52} {'ratio':>6} {'paired':>6} {'decisions p50':>14} {'systemone p50':>14}")
                    for name, bodies in decision_cases(args.scale):
                        decisions, systemone, paired = run_decisions_case(openjev, bodies)
                        print(
                            f"{name:<52} {decisions / systemone:6.3f} {paired:6.3f} {decisions * 1000:11.2f} ms "
                            f"{systemone * 1000:11.2f} ms",
                            flush=True,
                        )
            finally:
                stop_openjev(server)
    finally:
        for process in helpers:
            process.terminate()
            process.join()


if __name__ == "__main__":
    main()
