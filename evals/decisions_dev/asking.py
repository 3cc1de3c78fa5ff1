"""Ask a Jev `/v1/systemone` the `decisions-dev` suite (dataset.py) and record one line per question.

Called by `uv run evals/run.py decisions-dev --url URL --out DIR` (`--limit N`: the first N states,
pairs kept whole when N is even). Ask a server that corrects nothing itself
(`OPENJEV_CONTEXTUAL_CALIBRATION=`, `OPENJEV_OPTION_SHIFTS=1`, `OPENJEV_LABEL_PRIOR=false`,
`OPENJEV_SCORE_REVERSE=false`, `OPENJEV_SCORE_TEMPERATURE=1`), so that
every variant of report.py can be derived from the raw readouts.

Contract: first DIR/content_free.json, {family: {question id: {view: distribution in the
question's own order}}}, one request per family over CONTENT_FREE_STATE (`N/A`), and
DIR/content_free_neutral.json, the same over each family's neutral state. Then one request per state;
DIR/results.jsonl gets one line per question: `position`, `id` (state id/question id), `state`,
`family`, `pair`, `half`, `split`, `permissive`, `type`, `gold`, `choice` (the plain readout's
answer: yes/no, the option key, or the most probable level index, as strings), `probabilities`
(plain view), `views` (each extra view's distribution), `content_free` and `content_free_neutral`
(per view; null for a noul), `model`, `usage`, `latency_s`.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from evals.decisions_dev.dataset import (
    CONTENT_FREE_KINDS,
    DECISIONS_DEV_SHA256,
    PROTOCOL,
    VIEWS,
    calibrated_questions,
    content_free_request,
    distribution,
    load_states,
    state_request,
)
from evals.decisions_dev.positions import POSITION_PROTOCOL, choice_questions, position_request, position_views
from evals.decisions_dev.run_report import write_report
from evals.harness import runs
from evals.harness.data import Suite
from evals.harness.transport import connect, post_answers


def load_suite() -> Suite:
    return Suite("decisions-dev", "decisions-dev: policy decisions in contrastive pairs, gold by rule",
                 DECISIONS_DEV_SHA256, load_states())  # fmt: skip


@dataclass(frozen=True)
class Asked:
    """What a run asks of each state: the default protocol (dataset.py) or the position run (positions.py)."""

    protocol: dict[str, str]
    request: Callable[[dict[str, Any], str], dict[str, Any]]
    questions: Callable[[dict[str, Any]], dict[str, Any]]
    views: Callable[[dict[str, Any]], tuple[str, ...]]
    content_free: bool


DEFAULT = Asked(PROTOCOL, state_request, lambda state: state["questions"], lambda q: VIEWS[q["type"]], True)
POSITIONS = Asked(
    POSITION_PROTOCOL, position_request, choice_questions, lambda q: position_views(len(q["criteria"])), False
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--position-views",
        action="store_true",
        help="decisions-dev: ask only each state's choice question, in every cyclic rotation, the canonical "
        "order and the reversed order (evals/decisions_dev/positions.py)",
    )


def answered(
    question: dict[str, Any], answers: dict[str, Any], question_id: str, views: tuple[str, ...] | None = None
) -> dict[str, dict[str, float]]:
    """The question's distribution in every view it was asked in, keyed plain and by view name."""
    found = {"plain": distribution(question, "plain", answers[question_id])}
    for view in VIEWS[question["type"]] if views is None else views:
        found[view] = distribution(question, view, answers[f"{question_id}@{view}"])
    return found


def read_known(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


async def ask_content_free(
    client: httpx.AsyncClient, states: tuple[Any, ...], path: Path, model: str, kind: str
) -> dict:
    known = read_known(path)
    for family in tqdm(dict.fromkeys(state["family"] for state in states), desc=f"content-free ({kind})"):
        if family in known:
            continue
        request = content_free_request(states, family, model, kind)
        body, _ = await post_answers(client, request)
        example = next(state for state in states if state["family"] == family)
        known[family] = {
            question_id: {
                view: list(dist.values()) for view, dist in answered(question, body["answers"], question_id).items()
            }
            for question_id, question in calibrated_questions(example).items()
        }
        runs.write_json(path, known)
    return known


async def ask_state(
    client: httpx.AsyncClient,
    priors: dict[str, dict[str, Any]],
    model: str,
    asked: Asked,
    unit: tuple[int, dict[str, Any]],
) -> list[dict[str, Any]]:
    first, state = unit
    questions = asked.questions(state)
    try:
        body, latency = await post_answers(client, asked.request(state, model))
    except (ValueError, KeyError, TypeError) as error:
        return [
            {"position": first + offset, "id": f"{state['id']}/{qid}", "error": str(error)}
            for offset, qid in enumerate(questions)
        ]
    records = []
    for offset, (question_id, question) in enumerate(questions.items()):
        views = answered(question, body["answers"], question_id, asked.views(question))
        plain = views.pop("plain")
        if question["type"] == "noul":
            choice = "yes" if plain["yes"] >= 0.5 else "no"
        else:
            choice = max(plain, key=plain.__getitem__)
        records.append({
            "position": first + offset, "id": f"{state['id']}/{question_id}", "state": state["id"],
            "family": state["family"], "subject": state["family"], "pair": state["pair"], "half": state["half"],
            "split": state["split"], "permissive": state["permissive"],
            "type": question["type"], "gold": state["gold"][question_id]["gold"], "choice": choice,
            "probabilities": plain, "views": views,
            "content_free": priors["na"].get(state["family"], {}).get(question_id),
            "content_free_neutral": priors["neutral"].get(state["family"], {}).get(question_id),
            "model": body.get("model"), "usage": body.get("usage"), "latency_s": latency,
        })  # fmt: skip
    return records


async def evaluate(args: argparse.Namespace, suite: Suite, directory: Path) -> int:
    states = suite.items[: args.limit]
    asked = POSITIONS if getattr(args, "position_views", False) else DEFAULT
    async with connect(args) as (client, models, settings, unread):
        meta = runs.prepare_run(directory, suite, args.url, models, settings, asked.protocol, args.model, unread=unread)
        started = runs.begin_session(directory, meta, limit=args.limit)
        model = args.model or PROTOCOL["model"]
        files = {"na": "content_free.json", "neutral": "content_free_neutral.json"}
        priors = {
            kind: await ask_content_free(client, states, directory / files[kind], model, kind)
            if asked.content_free
            else {}
            for kind in CONTENT_FREE_KINDS
        }
        done = runs.keep_answered(directory)
        pending, position = [], 0
        for state in states:
            if not {f"{state['id']}/{qid}" for qid in asked.questions(state)} <= done:
                pending.append((position, state))
            position += len(asked.questions(state))
        ask = functools.partial(ask_state, client, priors, model, asked)
        progress = tqdm(total=len(pending), unit="state")
        errors = await runs.ask_pool(ask, pending, args.concurrency, directory / "results.jsonl", progress)
    runs.end_session(directory, meta, started, len(pending), errors)
    return errors


def run_decisions_dev(args: argparse.Namespace, suite: Suite) -> int:
    """`evals/run.py decisions-dev`: ask, then write the report; exit status as evals/run.py's."""
    directory = Path(args.out)
    return runs.ask_then_report(
        evaluate(args, suite, directory),
        directory,
        write_report,
        lambda report, errors: f"decisions-dev: {report['n']} answered, {errors} errors",
    )
