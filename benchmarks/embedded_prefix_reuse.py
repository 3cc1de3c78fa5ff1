"""Benchmark: does prefix reuse make 8 questions cost about as much as 1 on the embedded CPU backend?

Drives `EmbeddedBackend` the way openjev's engine does: one warm-up readout of the shared chat state,
then one readout per question (prefix + question suffix), submitted concurrently. For 1 and N questions
over a ~2000-token chat state it times the whole request with prefix reuse on and off (off:
`prefix_cache_bytes=0`, so every question prefills the whole prompt), then a repeat of the N-question
request over the same state with reworded questions (its warm-up hits the cache). Reuse-on figures are
the best of `--repeats` runs, each over a new state. Goal: N questions <= 1.5x one question with reuse on.

    python benchmarks/embedded_prefix_reuse.py [--model packaged:qwen2.5-coder-1.5b] [--questions 8]

Needs the `cpu` extra and the model (the packaged default converts on first use, about a minute).
Timings on shared or small VMs are noisy: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import jinja2
from tokenizers import Tokenizer

from openjev.backends.base import LabelLogprobs, ReadoutCall
from openjev.backends.embedded import EmbeddedBackend
from openjev.model_source import DEFAULT_MODEL

QUESTIONS = [
    ("Did the customer ask for a refund? A: yes B: no C: unclear", "A"),
    ("What is the main topic? A: a damaged delivery B: a login problem C: pricing", "A"),
    ("Was the agent rude at any point? A: yes B: no C: unclear", "B"),
    ("Did the customer mention a tracking number? A: yes B: no C: unclear", "A"),
    ("Is the customer a business? A: yes B: no C: unclear", "C"),
    ("Which item was damaged? A: a blender B: a laptop C: a sofa", "A"),
    ("Did the agent promise a replacement? A: yes B: no C: unclear", "A"),
    ("How does the customer feel? A: frustrated B: delighted C: indifferent", "A"),
]


class Chat:
    """Renders prompts with the model's own chat template, as openjev's prompt layer does."""

    def __init__(self, model_dir: Path) -> None:
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        template = json.loads((model_dir / "tokenizer_config.json").read_text())["chat_template"]
        self.template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(template)
        self.labels = [self.tokenizer.encode(label).ids[0] for label in (" A", " B", " C")]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def state_prefix(self, marker: str, target_tokens: int) -> list[int]:
        """A support conversation of about `target_tokens` tokens, up to where the question goes."""
        turns: list[str] = []
        while True:
            n = len(turns) // 2
            turns += [
                f"Customer: Hi, this is {marker}. My order #{4711 + n} (a blender) arrived with a cracked jar "
                f"and the box was crushed. Tracking number ZX{9000 + n} says it was dropped twice. I want "
                "my money back or a replacement, whichever is faster.",
                f"Agent: I am sorry about order #{4711 + n}. I have opened a damage claim and will ship a "
                "replacement blender today; you will get a confirmation email within the hour.",
            ]
            user = "Here is a support conversation:\n\n" + "\n".join(turns)
            prompt = self.template.render(
                messages=[
                    {"role": "system", "content": "You answer questions about conversations."},
                    {"role": "user", "content": user + "\n\nQUESTION_GOES_HERE"},
                ],
                add_generation_prompt=True,
            )
            prefix = prompt[: prompt.index("QUESTION_GOES_HERE")]
            ids = self.encode(prefix)
            if len(ids) >= target_tokens:
                return ids

    def question_suffix(self, question: str) -> list[int]:
        # The prompt layer tokenizes the question part on its own, after the shared prefix.
        return self.encode(f"Question: {question}<|im_end|>\n<|im_start|>assistant\nAnswer:")


@dataclass(frozen=True)
class Timing:
    warm_up: float
    branches: float
    results: list[LabelLogprobs]

    @property
    def total(self) -> float:
        return self.warm_up + self.branches

    def describe(self) -> str:
        cached = sorted({r.cached_tokens for r in self.results})
        return (
            f"{self.total:6.2f}s (warm-up {self.warm_up:5.2f}s + branches {self.branches:5.2f}s)  "
            f"branch cached_tokens {cached}"
        )


async def request(backend: EmbeddedBackend, chat: Chat, prefix: list[int], n: int, lead: str = "") -> Timing:
    """One openjev-style request: the warm-up readout, then `n` branch readouts concurrently."""
    started = time.perf_counter()
    await backend.readout(ReadoutCall("warm-up", prefix, chat.labels[:1]))
    warmed = time.perf_counter()
    branches = [
        backend.readout(ReadoutCall(f"q{i}", prefix + chat.question_suffix(lead + question), chat.labels))
        for i, (question, _) in enumerate(QUESTIONS[:n])
    ]
    results = list(await asyncio.gather(*branches))
    return Timing(warmed - started, time.perf_counter() - warmed, results)


async def measure(args: argparse.Namespace, chat: Chat | None, reuse: bool) -> tuple[Chat, dict[str, float]]:
    backend = EmbeddedBackend(
        args.model, cache_dir=args.cache_dir, dtype=args.dtype, prefix_cache_bytes=(1 << 30) if reuse else 0
    )
    started = time.perf_counter()
    await backend.start()
    assert backend.tokenizer_dir is not None
    chat = chat or Chat(backend.tokenizer_dir)
    print(
        f"\n== reuse {'on' if reuse else 'off'}: {backend.model_name}, {backend.dtype}, {backend.threads} threads, "
        f"start {time.perf_counter() - started:.1f}s, load average {os.getloadavg()[0]:.1f}"
    )
    # First-call overheads (kernel setup for long prompts) do not belong to any measurement.
    await request(backend, chat, chat.state_prefix(f"init-{reuse}", args.prefix_tokens), 1)

    # The baseline without reuse takes minutes per run: it is measured once.
    repeats = args.repeats if reuse else 1
    timings: dict[str, float] = {}
    for n in (1, args.questions):
        runs: list[Timing] = []
        for run in range(repeats):
            prefix = chat.state_prefix(f"run-{reuse}-{n}-{run}", args.prefix_tokens)  # a new state: nothing cached
            runs.append(await request(backend, chat, prefix, n))
            print(f"{n:>2} question(s) over a new {len(prefix)}-token state: {runs[-1].describe()}")
        timings[f"{n}q"] = min(timing.total for timing in runs)
        if n == args.questions:
            answers = "".join("ABC"[max(range(3), key=lambda i: r.logprobs[i])] for r in runs[-1].results)
            expected = "".join(answer for _, answer in QUESTIONS[:n])
            print(f"   answers {answers} (expected about {expected})")
            if reuse:
                # The same state again with reworded questions: the warm-up is answered from the cache.
                timing = await request(backend, chat, prefix, n, lead="Once more: ")
                timings["repeat"] = timing.total
                print(f"{n:>2} new question(s) over the same state: {timing.describe()}")
    health = await backend.health()
    print(f"   prefix cache: {health.detail['prefix_cache']}; load average {os.getloadavg()[0]:.1f}")
    await backend.aclose()
    return chat, timings


async def main(args: argparse.Namespace) -> None:
    chat, on = await measure(args, None, reuse=True)
    _, off = await measure(args, chat, reuse=False)
    n = args.questions
    ratio = on[f"{n}q"] / on["1q"]
    print(f"\n== summary (seconds per request, warm-up included; reuse on: best of {args.repeats})")
    print(
        f"reuse on : 1q {on['1q']:6.2f}   {n}q {on[f'{n}q']:6.2f}   {n}q again over the same state {on['repeat']:6.2f}"
    )
    print(f"reuse off: 1q {off['1q']:6.2f}   {n}q {off[f'{n}q']:6.2f}")
    print(f"{n}q / 1q with reuse on: {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"{n}q speed-up from reuse: {off[f'{n}q'] / on[f'{n}q']:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="packaged:<key>, a model dir, a .gguf or a hub id")
    parser.add_argument("--cache-dir", type=Path, default=None, help="converted-model cache (default: user cache)")
    parser.add_argument("--dtype", default=None, help="bfloat16 / float32 (default: by CPU)")
    parser.add_argument("--questions", type=int, default=8, choices=range(2, len(QUESTIONS) + 1))
    parser.add_argument("--repeats", type=int, default=2, help="runs per reuse-on measurement (best is kept)")
    parser.add_argument("--prefix-tokens", type=int, default=2000, help="chat state length in tokens")
    parser.add_argument("--log-level", default="WARNING")
    cli = parser.parse_args()
    logging.basicConfig(level=cli.log_level.upper(), format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(main(cli))
