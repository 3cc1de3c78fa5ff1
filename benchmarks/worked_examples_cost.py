"""Benchmark: what one worked example costs a request, in input tokens and latency.

Asks a running server (`--url`, any Jev `/v1/systemone`) the first `--items` choice items of
`decisions-examples-dev`, each three ways in a row: zero-shot (criteria descriptions only), with one
worked example per option, and with two (the option's example twice). Each request holds that one
question over the item's state after a unique marker line: the prompt differs from its first
state token on, so no request reuses another's prefix (a marker after the state would leave the
template and the state a prefix the three requests share, cached for all but the first).
Prints, per examples-per-option count, the median request latency and input tokens, and the cost
per example: (median over items of the difference to zero-shot) / (examples added).

    uv run python benchmarks/worked_examples_cost.py --url http://127.0.0.1:8000 [--items 8]

Timings on shared or small VMs are noisy: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ITEMS = Path(__file__).resolve().parents[1] / "evals" / "data" / "decisions-examples-dev" / "items.jsonl"
COUNTS = (0, 1, 2)


def question(item: dict[str, Any], per_option: int) -> dict[str, Any]:
    if per_option == 0:
        return item["plain"]
    criteria = {
        key: {**entry, "examples": entry["examples"] * per_option} for key, entry in item["worked"]["criteria"].items()
    }
    return {**item["worked"], "criteria": criteria}


def ask(client: httpx.Client, item: dict[str, Any], per_option: int, marker: str) -> tuple[float, int]:
    body = {
        "model": "jev-latest",
        "state": f"[{marker}]\n{item['state']}",
        "questions": {"q": question(item, per_option)},
    }
    started = time.perf_counter()
    response = client.post("/v1/systemone", json=body)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()["usage"]["input_tokens"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--items", type=int, default=8)
    args = parser.parse_args()
    items = [item for item in map(json.loads, ITEMS.read_text().splitlines()) if item["type"] == "choice"]
    items = items[: args.items]
    seen: dict[int, list[tuple[float, int]]] = {count: [] for count in COUNTS}
    options: list[int] = []
    with httpx.Client(base_url=args.url, timeout=600) as client:
        for index, item in enumerate(items):
            options.append(len(item["plain"]["criteria"]))
            for count in COUNTS:
                seen[count].append(ask(client, item, count, f"run {time.time_ns()} item {index} x{count}"))
    for count in COUNTS:
        latency = statistics.median(s for s, _ in seen[count])
        tokens = statistics.median(t for _, t in seen[count])
        line = f"{count} per option: p50 {latency:.2f} s, {tokens:.0f} input tokens"
        if count:
            added = [count * n for n in options]
            per_token = [(seen[count][i][1] - seen[0][i][1]) / added[i] for i in range(len(items))]
            per_second = [(seen[count][i][0] - seen[0][i][0]) / added[i] for i in range(len(items))]
            milliseconds = statistics.median(per_second) * 1000
            line += f"; per example: {statistics.median(per_token):.1f} tokens, {milliseconds:.0f} ms"
        print(line)
    print(f"{len(items)} items, {statistics.mean(options):.1f} options on average", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
