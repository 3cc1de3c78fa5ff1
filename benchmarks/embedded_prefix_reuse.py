"""Benchmark: does prefix reuse make 8 questions cost about as much as 1 on the embedded CPU backend?

Runs real Jev requests through openjev's own engine (the prompt layer, labels, warm-up and concurrent
branches the API uses) on `EmbeddedBackend`, without HTTP. For 1 and N questions over a ~2000-token
chat state it times the backend phase of a request with prefix reuse on and off (off:
`prefix_cache_bytes=0`, so every question prefills the whole prompt), then the N-question request
again over the same state with reworded questions (its warm-up hits the cache). Figures are the
best of `--repeats` runs, each over a new state, for branches batched (the default) and one at a time
(`batch_bytes=0`). Goal: N questions <= 1.3x one question, batched.

    uv run python benchmarks/embedded_prefix_reuse.py [--model packaged:qwen2.5-coder-1.5b] [--questions 8]

Needs the `cpu` extra and the model (the packaged default converts on first use, about a minute).
Timings on shared or small VMs are noisy: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.answering.evaluation import Evaluation, PreparedRequest
from openjev.backends.embedded import EmbeddedBackend
from openjev.backends.embedded.model_source import DEFAULT_MODEL
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest

THREE_WAY = {"yes": None, "no": None, "unclear": None}
# (question, the option a careful reader picks)
QUESTIONS: list[tuple[dict[str, Any], str]] = [
    ({"type": "choice", "instructions": "Did the customer ask for a refund?", "criteria": THREE_WAY}, "yes"),
    ({"type": "choice", "instructions": "What is the main topic?",
      "criteria": {"damage": "A damaged delivery", "login": "A login problem", "pricing": "Pricing"}}, "damage"),
    ({"type": "choice", "instructions": "Was the agent rude at any point?", "criteria": THREE_WAY}, "no"),
    ({"type": "choice", "instructions": "Did the customer mention a tracking number?", "criteria": THREE_WAY}, "yes"),
    ({"type": "choice", "instructions": "Is the customer a business?", "criteria": THREE_WAY}, "unclear"),
    ({"type": "choice", "instructions": "Which item was damaged?",
      "criteria": {"blender": "A blender", "laptop": "A laptop", "sofa": "A sofa"}}, "blender"),
    ({"type": "choice", "instructions": "Did the agent promise a replacement?", "criteria": THREE_WAY}, "yes"),
    ({"type": "choice", "instructions": "How does the customer feel?",
      "criteria": {"frustrated": None, "delighted": None, "indifferent": None}}, "frustrated"),
]  # fmt: skip


def jev_request(state: list[dict[str, str]], count: int, lead: str = "") -> SystemOneRequest:
    questions = {f"q{i}": {**question, "instructions": lead + question["instructions"]}
                 for i, (question, _) in enumerate(QUESTIONS[:count])}  # fmt: skip
    return SystemOneRequest.model_validate({"model": "jev-latest", "state": state, "questions": questions})


def support_chat(engine: Engine, marker: str, target_tokens: int) -> list[dict[str, str]]:
    """A support conversation whose shared prefix is about `target_tokens` tokens, unique per `marker`."""
    turns = [{"role": "system", "content": f"Support chat {marker}."}]
    while len(engine.prepare(jev_request(turns, 1)).shared_prefix_ids) < target_tokens:
        n = len(turns) // 2
        turns += [
            {"role": "user", "content": f"Hi, this is {marker}. My order #{4711 + n} (a blender) arrived with a "
             f"cracked jar and the box was crushed. Tracking number ZX{9000 + n} says it was dropped twice. "
             "I want my money back or a replacement, whichever is faster."},
            {"role": "assistant", "content": f"I am sorry about order #{4711 + n}. I have opened a damage claim "
             "and will ship a replacement blender today; you will get a confirmation email within the hour."},
        ]  # fmt: skip
    return turns


@dataclass(frozen=True)
class Timing:
    prepared: PreparedRequest
    evaluation: Evaluation

    @property
    def total(self) -> float:
        return self.evaluation.prefill_seconds + self.evaluation.branches_seconds

    def describe(self) -> str:
        return (
            f"{self.total:6.2f}s (warm-up {self.evaluation.prefill_seconds:5.2f}s + branches "
            f"{self.evaluation.branches_seconds:5.2f}s)  branch cached tokens {self.evaluation.cached_tokens}"
        )


async def request(engine: Engine, state: list[dict[str, str]], count: int, lead: str = "") -> Timing:
    prepared = engine.prepare(jev_request(state, count, lead))
    return Timing(prepared, await engine.evaluate(prepared))


MODES = {  # name: (prefix reuse, batched branches)
    "batched": (True, True),
    "one at a time": (True, False),
    "reuse off": (False, False),
}


async def measure(args: argparse.Namespace, mode: str) -> dict[str, float]:
    reuse, batched = MODES[mode]
    backend = EmbeddedBackend(
        args.model,
        cache_dir=args.cache_dir,
        dtype=args.dtype,
        prefix_cache_bytes=(1 << 30) if reuse else 0,
        batch_bytes=(1 << 29) if batched else 0,
    )
    started = time.perf_counter()
    await backend.start()
    assert backend.tokenizer_dir is not None
    # The reuse-off baseline runs for minutes: no request timeout here.
    engine = Engine(Settings(request_timeout=24 * 3600), ChatTokenizer(backend.tokenizer_dir), backend)
    print(
        f"\n== {mode}: {backend.model_name}, {backend.dtype}, {backend.threads} threads, "
        f"start {time.perf_counter() - started:.1f}s, load average {os.getloadavg()[0]:.1f}"
    )
    # First-call overheads (kernel setup for long prompts) do not belong to any measurement.
    await request(engine, support_chat(engine, f"init-{mode}", args.prefix_tokens), 1)

    repeats = args.repeats if reuse else 1
    timings: dict[str, float] = {}
    for count in (1, args.questions):
        runs: list[Timing] = []
        for run in range(repeats):
            state = support_chat(engine, f"run-{mode}-{count}-{run}", args.prefix_tokens)  # new: nothing cached
            runs.append(await request(engine, state, count))
            prefix = len(runs[-1].prepared.shared_prefix_ids)
            print(f"{count:>2} question(s) over a new {prefix}-token state: {runs[-1].describe()}")
        timings[f"{count}q"] = min(timing.total for timing in runs)
        if count == args.questions:
            answers = runs[-1].evaluation.answers
            right = sum(answers[f"q{i}"]["choice"] == expected for i, (_, expected) in enumerate(QUESTIONS[:count]))
            print(f"   {right}/{count} answers as a careful reader would give them")
            if reuse:
                # The same state again with reworded questions: the warm-up is answered from the cache.
                timing = await request(engine, state, count, lead="Once more: ")
                timings["repeat"] = timing.total
                print(f"{count:>2} new question(s) over the same state: {timing.describe()}")
    health = await backend.health()
    print(f"   prefix cache: {health.detail['prefix_cache']}; load average {os.getloadavg()[0]:.1f}")
    await backend.aclose()
    return timings


async def main(args: argparse.Namespace) -> None:
    modes = [mode for mode in MODES if mode != "reuse off" or args.without_reuse]
    results = {mode: await measure(args, mode) for mode in modes}
    n = args.questions
    print(f"\n== summary (seconds of backend work per request, warm-up included; best of {args.repeats})")
    for mode, timing in results.items():
        again = f"   {n}q again, same state {timing['repeat']:6.2f}" if "repeat" in timing else ""
        ratio = timing[f"{n}q"] / timing["1q"]
        print(f"{mode:<14}: 1q {timing['1q']:6.2f}   {n}q {timing[f'{n}q']:6.2f}   {n}q/1q {ratio:.2f}x{again}")
    print(f"goal: batched {n}q/1q <= 1.3x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="packaged:<key>, a model dir, a .gguf or a hub id")
    parser.add_argument("--cache-dir", type=Path, default=None, help="converted-model cache (default: user cache)")
    parser.add_argument("--dtype", default=None, help="bfloat16 / float32 (default: by CPU)")
    parser.add_argument("--without-reuse", action="store_true", help="also measure with prefix reuse off (slow)")
    parser.add_argument("--questions", type=int, default=8, choices=range(2, len(QUESTIONS) + 1))
    parser.add_argument("--repeats", type=int, default=2, help="runs per reuse-on measurement (best is kept)")
    parser.add_argument("--prefix-tokens", type=int, default=2000, help="chat state length in tokens")
    parser.add_argument("--log-level", default="WARNING")
    cli = parser.parse_args()
    logging.basicConfig(level=cli.log_level.upper(), format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(main(cli))
