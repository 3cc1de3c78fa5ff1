"""Ask a Jev `/v1/systemone` the `decisions-examples-dev` suite and record one line per question asked.

Called by `uv run evals/run.py decisions-examples-dev --url URL --out DIR` (evals/harness/run.py:
the same retries, resuming and run.json checks as every suite; `--limit N` means the first N items).

Contract: one request per item: the item's state and its question twice, `plain` (criteria
descriptions only) and `worked` (each description with its one worked example), both read over the
same prefix. DIR/results.jsonl gets two lines per item, `{item id}/plain` and `{item id}/worked`:
`position`, `id`, `item`, `pair`, `family`, `type`, `arm`, `gold`, `gold_position`, `choice` (the
answer as a label: yes/no at p >= 0.5, the option's name, or the most probable level as a string),
`probabilities`, `model`, `latency_s` and `usage` of the item's request (on both lines).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from evals.harness import runs
from evals.harness.data import DATA, Suite, read_verified
from evals.harness.transport import connect, post_answers
from evals.worked_examples.report import write_report

NAME = "decisions-examples-dev"
ITEMS = DATA / NAME / "items.jsonl"
ITEMS_SHA256 = "4e2235a7f6afc355c867965ebafdc4c9a15ca3a4d85baa77a02f5fdafedfc06c"
ARMS = ("plain", "worked")
PROTOCOL = {
    "model": "jev-latest",
    "request": "one request per item: its state, and its question as `plain` (descriptions only) and as `worked` "
    "(each criteria entry {what, examples: [one solved state]})",
    "score": "exact match of the answer label with the gold: yes/no at 0.5, the returned choice, the argmax level",
}


def load_suite() -> Suite:
    data = read_verified(ITEMS, ITEMS_SHA256)
    items = tuple(json.loads(line) for line in data.decode().splitlines())
    return Suite(
        NAME, "decisions-examples-dev: described options, zero-shot and with worked examples", ITEMS_SHA256, items
    )


def label(question_type: str, answer: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """The answer as a label and its distribution."""
    if question_type == "noul":
        yes = float(answer["noul"])
        return ("yes" if yes >= 0.5 else "no"), {"yes": yes, "no": 1 - yes}
    probabilities = {key: float(value) for key, value in answer["probabilities"].items()}
    if question_type == "choice":
        return str(answer["choice"]), probabilities
    return max(probabilities, key=probabilities.__getitem__), probabilities


async def ask_item(client: httpx.AsyncClient, model: str, unit: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
    index, item = unit
    request = {"model": model, "state": item["state"], "questions": {arm: item[arm] for arm in ARMS}}
    base = {key: item[key] for key in ("pair", "family", "type", "gold")}
    lines = [{"position": 2 * index + n, "id": f"{item['id']}/{arm}", "item": item["id"], "arm": arm, **base,
              "gold_position": item["position"]} for n, arm in enumerate(ARMS)]  # fmt: skip
    try:
        body, latency = await post_answers(client, request)
        for line in lines:
            choice, probabilities = label(item["type"], body["answers"][line["arm"]])
            line.update(choice=choice, probabilities=probabilities, model=body.get("model"), latency_s=latency,
                        usage=body.get("usage"))  # fmt: skip
    except (ValueError, KeyError, TypeError) as error:
        for line in lines:
            line["error"] = repr(error)[:300]
    return lines


async def evaluate(args: argparse.Namespace, suite: Suite, directory: Path) -> int:
    items = suite.items[: args.limit]
    async with connect(args) as (client, models, settings, unread):
        meta = runs.prepare_run(directory, suite, args.url, models, settings, PROTOCOL, args.model, unread=unread)
        started = runs.begin_session(directory, meta, limit=args.limit)
        done = runs.keep_answered(directory)
        pending = [(i, item) for i, item in enumerate(items) if not {f"{item['id']}/{arm}" for arm in ARMS} <= done]
        model = args.model or PROTOCOL["model"]

        async def ask(unit: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
            return await ask_item(client, model, unit)

        progress = tqdm(total=len(pending), unit="item")
        errors = await runs.ask_pool(ask, pending, args.concurrency, directory / "results.jsonl", progress)
    runs.end_session(directory, meta, started, len(pending), errors)
    return errors


def run_suite(args: argparse.Namespace, suite: Suite) -> int:
    """`evals/run.py decisions-examples-dev`: ask, then write the report; exit status as evals/run.py's."""
    directory = Path(args.out)

    def line(report: dict[str, Any], errors: int) -> str:
        arms = ", ".join(f"{arm} {row['accuracy']:.1%}" for arm, row in report["by_arm"].items())
        return f"{NAME}: {report['n']} items, {errors} errors; {arms}"

    return runs.ask_then_report(evaluate(args, suite, directory), directory, write_report, line)
