"""Benchmark: what a question answered through a head costs against a plain readout, on the embedded default.

A head reads the final hidden state at the answer position beside the label log-probabilities
(`tasks/head.py`), so a question through one costs a readout that carries the hidden state plus the
head's arithmetic. This times both on `LlamaCppBackend` (the real packaged default model), without HTTP:

1. Readouts: one 8-option choice question over a user message of about `--state-tokens` tokens, its
   prompt built by openjev's own engine (`Engine.prepare`). Each repeat reads two prompts that differ
   from their first token (a unique marker), one plain and one carrying the hidden state, in an order
   that alternates between repeats, so both see the same load and neither reuses the other's prefix.
   The ratio hidden / plain is taken per repeat, of wall time and of the process's CPU time (llama.cpp's
   threads are the process's: on a loaded machine CPU time moves less with the others' work than wall
   time does); each figure is the geometric mean of the ratios with a 95% bootstrap interval over repeats.
2. The head: `RidgeHead.probabilities` for one question (a head `--width` wide over 8 labels, random
   weights of the stored shape), its CPU time per call (`time.process_time`) over `--calls` calls.

Goal: a question through a head (hidden readout + head) at most 1.1x a plain readout; the head under 1 ms
of CPU per question.

    uv run python benchmarks/hidden_state_readout.py [--model packaged:qwen2.5-coder-1.5b] [--repeats 12]

Needs the `cpu` extra and the model (the packaged default is assembled on first use). Timings on
shared machines are noisy: the load average is printed before and after, and only ratios measured in
the same run are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
import uuid
from pathlib import Path

import numpy as np

from openjev.backends.base import ReadoutCall
from openjev.backends.embedded import LlamaCppBackend
from openjev.backends.embedded.model_source import DEFAULT_MODEL
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest
from openjev.tasks.head import RidgeHead

LABELS = 8
QUESTION = {
    "type": "choice",
    "instructions": "What does the customer want?",
    "criteria": {
        "refund": "Money back for an order",
        "replacement": "A new item instead of a damaged one",
        "tracking": "Where a parcel is",
        "cancel_order": "Stop an order before it ships",
        "change_address": "Deliver to another address",
        "invoice": "A copy of a bill",
        "account_access": "Cannot log in",
        "complaint": "Unhappy with the service, no specific fix",
    },
}
MESSAGE = (
    "Order #{n} arrived yesterday with the blender jar cracked and the box crushed; the tracking page "
    "says it was dropped twice on the way. I paid with my card and would like this sorted quickly. "
)


def prompt(engine: Engine, marker: str, state_tokens: int) -> tuple[list[int], tuple[int, ...]]:
    """The prompt ids and label ids of the question over a message of about `state_tokens` tokens."""
    text, n = f"[{marker}] ", 0
    while True:
        request = SystemOneRequest.model_validate({"model": "jev-latest", "state": text, "questions": {"q": QUESTION}})
        prepared = engine.prepare(request)
        if len(prepared.shared_prefix_ids) >= state_tokens:
            branch = prepared.branches[0]
            return prepared.shared_prefix_ids + branch.suffix_ids, branch.label_token_ids
        text += MESSAGE.format(n=4711 + n)
        n += 1


async def timed(backend: LlamaCppBackend, ids: list[int], labels: tuple[int, ...], hidden: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process) of one readout."""
    started, cpu = time.perf_counter(), time.process_time()
    answer = await backend.readout(ReadoutCall(uuid.uuid4().hex, ids, labels, hidden_state=hidden))
    seconds = (time.perf_counter() - started, time.process_time() - cpu)
    assert (answer.hidden_state is not None) == hidden
    return seconds


def interval(ratios: list[float], draws: int = 4000) -> tuple[float, float, float]:
    """Geometric mean of `ratios` and its 95% bootstrap interval."""
    logs = np.log(np.asarray(ratios))
    rng = np.random.default_rng(0)
    means = logs[rng.integers(0, len(logs), (draws, len(logs)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return math.exp(logs.mean()), math.exp(low), math.exp(high)


Timings = list[tuple[float, float]]


async def readouts(args: argparse.Namespace) -> tuple[Timings, Timings, int]:
    backend = LlamaCppBackend(args.model, cache_dir=args.cache_dir, context=args.context)
    started = time.perf_counter()
    await backend.start()
    assert backend.tokenizer_dir is not None
    engine = Engine(Settings(request_timeout=3600), ChatTokenizer(backend.tokenizer_dir), backend)
    print(f"{backend.model_name} on llama.cpp, {backend.threads} threads, start {time.perf_counter() - started:.1f}s")
    ids, labels = prompt(engine, "warm-up", args.state_tokens)
    await timed(backend, ids, labels, hidden=True)  # first-call setup belongs to neither
    plain, hidden = [], []
    for repeat in range(args.repeats):
        order = (False, True) if repeat % 2 == 0 else (True, False)
        for carries in order:
            ids, labels = prompt(engine, f"{uuid.uuid4().hex} {repeat} {carries}", args.state_tokens)
            (hidden if carries else plain).append(await timed(backend, ids, labels, carries))
        print(
            f"repeat {repeat:>2}: {len(ids)} tokens, plain {plain[-1][0]:.3f}s ({plain[-1][1]:.3f}s CPU), "
            f"hidden {hidden[-1][0]:.3f}s ({hidden[-1][1]:.3f}s CPU)"
        )
    await backend.aclose()
    return plain, hidden, len(ids)


def head_cost(width: int, calls: int) -> list[float]:
    """CPU seconds of `RidgeHead.probabilities` per call, in blocks of 100 calls."""
    rng = np.random.default_rng(1)
    features = width + LABELS
    weights = rng.normal(size=(features, LABELS)) / features
    mean, sd, bias = rng.normal(size=features), rng.uniform(0.5, 2, features), rng.normal(size=LABELS)
    head = RidgeHead(mean, sd, width, weights, bias, temperature=0.5, strength=1.0)
    hidden = rng.normal(size=width).astype(np.float32)
    logprobs = list(np.log(np.full(LABELS, 1 / LABELS)))
    per_call = []
    for _ in range(max(1, calls // 100)):
        started = time.process_time()
        for _ in range(100):
            head.probabilities(hidden, logprobs)
        per_call.append((time.process_time() - started) / 100)
    return per_call


def main(args: argparse.Namespace) -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    plain, hidden, tokens = asyncio.run(readouts(args))
    head = head_cost(args.width, args.calls)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    head_s = statistics.median(head)
    print(f"\n== {args.repeats} repeats, {tokens}-token prompts, interleaved")
    for name, at in (("wall", 0), ("CPU", 1)):
        ratio = interval([h[at] / p[at] for h, p in zip(hidden, plain, strict=True)])
        through = interval([(h[at] + head_s) / p[at] for h, p in zip(hidden, plain, strict=True)])
        print(
            f"{name}: plain p50 {statistics.median(p[at] for p in plain):.3f}s, "
            f"hidden p50 {statistics.median(h[at] for h in hidden):.3f}s; hidden / plain {ratio[0]:.3f}x "
            f"[{ratio[1]:.3f}, {ratio[2]:.3f}]; through a head / plain {through[0]:.3f}x "
            f"[{through[1]:.3f}, {through[2]:.3f}]"
        )
    print(f"head ({args.width} wide, {LABELS} labels): {head_s * 1000:.3f} ms CPU per question (p50 of blocks of 100)")
    print("goals: through a head <= 1.1x plain; the head < 1 ms of CPU")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="packaged:<key> or a .gguf")
    parser.add_argument("--cache-dir", type=Path, default=None, help="model cache (default: user cache)")
    parser.add_argument("--context", type=int, default=4096, help="KV memory in tokens")
    parser.add_argument("--state-tokens", type=int, default=200, help="the message's length in tokens")
    parser.add_argument("--repeats", type=int, default=12, help="pairs of readouts (plain, hidden)")
    parser.add_argument("--width", type=int, default=1536, help="the head's hidden width")
    parser.add_argument("--calls", type=int, default=3000, help="head applications timed")
    main(parser.parse_args())
