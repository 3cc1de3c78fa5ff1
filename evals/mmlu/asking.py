"""Ask a Jev `/v1/systemone` every item of an MMLU-family suite and record one line per item.

Called by `uv run evals/run.py SUITE ...` (evals/harness/run.py) for `mmlu-pro-matched`,
`mmlu-pro-dev` and `mmlu`; retries, run.json checks and sessions are the harness's
(evals/harness/transport.py, runs.py).

Contract:
- DIR/results.jsonl: one JSON line per item as soon as it is answered: `position` (in the suite
  order), `id`, `row`, `subject`, `gold`, then `choice`, `probabilities`, `confidence`, `model`,
  `usage`, `latency_s` (of the answered attempt), `attempts` and `server_timing_ms`; or `error`
  instead of the answer; and, when the server sends them (its thinking tier), `escalated` and
  `reasoning_tokens`. A failure status, or an answer that breaks the contract, is that item's error.
- `--shifts K` (part of the run's identity; a run.json without it means 1) also asks each item's
  options in the other rotations of `shift_offsets`, in the same request, recorded under `shifts`;
  `choice` and `probabilities` stay the protocol's.
- At the end DIR/report.{json,md} and DIR/reliability.png are written (report.py).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from evals.harness import runs
from evals.harness.run import at_least_one
from evals.harness.transport import connect, send_with_retry, server_timing, thinking_headers
from evals.mmlu.report import write_report
from evals.mmlu.suites import PROTOCOL, QUESTION_ID, Item, Suite, shift_id
from openjev.answering.answers import shift_offsets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shifts",
        type=at_least_one,
        default=1,
        help="MMLU suites: also ask each item's options in K-1 more cyclic rotations, in the same request "
        "(default 1: off)",
    )


def read_answer(body: Any, item: Item, question_id: str = QUESTION_ID) -> dict[str, Any]:
    """The fields recorded from a 200 answer; ValueError when it breaks the Jev contract for this item."""
    try:
        answer = body["answers"][question_id]
        probabilities = {letter: float(answer["probabilities"][letter]) for letter in item.letters}
        choice = answer["choice"]
        extra = set(answer["probabilities"]) - set(item.letters)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"malformed answer: {error!r}") from error
    if answer.get("type") != "choice" or choice not in probabilities or extra:
        raise ValueError(f"answer breaks the contract: {json.dumps(answer)[:300]}")
    return {
        "choice": choice,
        "probabilities": probabilities,
        "confidence": answer.get("confidence"),
        "model": body.get("model"),
        "usage": body.get("usage"),
    }


def read_shifts(body: Any, item: Item, offsets: Sequence[int]) -> dict[str, Any]:
    """Every rotation's distribution, by original letter, in `offsets` order (`--shifts`)."""
    return {
        "offsets": list(offsets),
        "probabilities": [read_answer(body, item, shift_id(offset))["probabilities"] for offset in offsets],
    }


async def ask(
    client: httpx.AsyncClient, item: Item, position: int, shifts: int = 1, model: str | None = None
) -> dict[str, Any]:
    """One item's results line: its answer, or an `error` for a failure status or a malformed answer."""
    record: dict[str, Any] = {
        "position": position,
        "id": item.id,
        "row": item.row,
        "subject": item.subject,
        "gold": item.gold,
    }
    offsets = shift_offsets(len(item.options), shifts)
    request = item.shifted_request(offsets) if shifts > 1 else item.request()
    if model is not None:
        request["model"] = model
    response, attempts, latency = await send_with_retry(lambda: client.post("/v1/systemone", json=request))
    try:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}: {response.text[:300]}")
        body = response.json()
        record.update(read_answer(body, item))
        if shifts > 1:
            record["shifts"] = read_shifts(body, item, offsets)
    except ValueError as error:
        record["error"] = str(error)
    record.update(latency_s=round(latency, 4), attempts=attempts, server_timing_ms=server_timing(response.headers))
    record.update(thinking_headers(response.headers))
    return record


async def ask_unit(client: httpx.AsyncClient, args: argparse.Namespace, unit: tuple[int, Item]) -> list[dict]:
    position, item = unit
    return [await ask(client, item, position, args.shifts, args.model)]


async def evaluate(args: argparse.Namespace, suite: Suite, directory: Path) -> int:
    """Ask every item of the suite's first --limit that DIR has no answer for; the number of errors."""
    items = suite.items[: args.limit]
    async with connect(args) as (client, models, settings, unread):
        # The protocol's own answer is unchanged by --shifts; the rotations are extra questions in the same request.
        meta = runs.prepare_run(directory, suite, args.url, models, settings, PROTOCOL, args.model,
                                extra={"shifts": args.shifts}, absent={"shifts": 1}, unread=unread)  # fmt: skip
        done = runs.keep_answered(directory)
        pending = [(position, item) for position, item in enumerate(items) if item.id not in done]
        started = runs.begin_session(directory, meta, limit=args.limit)
        progress = tqdm(total=len(items), initial=len(items) - len(pending), unit="item")
        ask_one = functools.partial(ask_unit, client, args)
        errors = await runs.ask_pool(ask_one, pending, args.concurrency, directory / "results.jsonl", progress)
    runs.end_session(directory, meta, started, len(pending), errors)
    return errors


def run_suite(args: argparse.Namespace, suite: Suite) -> int:
    """`evals/run.py SUITE` for the MMLU family: ask, then write the report; exit status as evals/run.py's."""
    directory = Path(args.out)
    errors = runs.guarded(evaluate(args, suite, directory))
    if errors is None:
        return 2
    if not any("error" not in record for record in runs.read_results(directory)):
        print(f"{suite.name}: no item was answered ({errors} errors); see {directory / 'results.jsonl'}")
        return 1
    report = write_report(directory)
    print(
        f"{suite.name}: {report['n']} answered, {report['errors']} errors, accuracy {report['accuracy']:.1%} "
        f"({report['accuracy_ci95'][0]:.1%}-{report['accuracy_ci95'][1]:.1%}); report in {directory}"
    )
    return 1 if errors else 0
