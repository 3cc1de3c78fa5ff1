"""`evals/run.py SUITE ...`: ask a Jev `/v1/systemone` every item of a registered suite, then write the report.

Usage: uv run evals/run.py SUITE [--url URL] [--api-key K] [--limit N] [--concurrency C] [--model NAME]
       [the suite's own options] --out DIR

Contract:
- SUITE is any registered suite (registry.py); its runner asks, records DIR/run.json and
  DIR/results.jsonl (runs.py) and writes the report. `--limit N` means the suite's first N items.
- `--model NAME` sends NAME as the request's `model` (e.g. the thinking tier, `openjev-think`); it is
  part of the run's identity (run.json `model`), while the protocol and so `compare.py` stay the same.
- Resumable: running again on the same DIR asks only what has no answer yet (errors are asked again);
  a DIR made for another suite, protocol, dataset, URL, set of served model names, answer settings
  or suite option is refused (runs.py).
- Exit status: 0 when every item asked for has an answer, 1 when some have errors, 2 when the run
  could not go on (a refused DIR, an unreachable server).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from evals.harness import registry

DEFAULT_URL = "http://127.0.0.1:8000"


def at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run an answer-quality suite against a Jev /v1/systemone.")
    parser.add_argument("suite", choices=registry.names())
    parser.add_argument("--url", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})")
    parser.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    parser.add_argument("--limit", type=at_least_one, help="ask only the suite's first N items")
    parser.add_argument("--concurrency", type=at_least_one, default=1, help="requests in flight (default 1)")
    parser.add_argument("--out", required=True, help="run directory (created; resumed when it exists)")
    parser.add_argument("--model", help="the request's `model` (default: the protocol's, jev-latest)")
    for add_arguments in dict.fromkeys(spec.add_arguments for spec in registry.SUITES.values()):
        if add_arguments is not None:
            add_arguments(parser)
    args = parser.parse_args(argv)
    args.url = args.url.rstrip("/")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spec = registry.get(args.suite)
    return spec.run(args, spec.load())
