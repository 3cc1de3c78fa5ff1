"""Ask a Jev `/v1/systemone` the `jev-dev` suite (dataset.py) and record one line per question.

Called by `uv run evals/run.py jev-dev --url URL --out DIR` (evals/harness/run.py: the same retries,
resuming and run.json checks as every suite; `--limit N` means the first N states, `--types` the
question types kept).

Contract:
- The server's answer settings (run.json) say which corrections it applies itself
  (variants.served_corrections). A type it calibrates answers content-free readouts divided by
  themselves (uniform), so none are asked for it; its answers are recorded as served, and the
  report derives only the variants that keep what the server applied (variants.py). Which settings
  give the raw readouts every variant needs is printed to stderr (`raw_readouts_note`).
- First, DIR/content_free.json: {question key: the content-free distribution, in the order shown},
  each distinct question text of an uncalibrated type asked once over CONTENT_FREE_STATE,
  CONTENT_FREE_BATCH a request.
- Then per state, one request with every question and view (dataset.state_request), and one more
  with the renamed question alone (the batching law). DIR/results.jsonl gets one line per question:
  `position`, `id` (state id/question id), `state`, `domain`, `type`, `fact`, `gold`, `choice` (the
  plain readout's answer: yes/no, the option name, or the level index, all as strings),
  `probabilities` (the plain view's distribution), `views` (every extra view's distribution, and
  `renamed`/`alone` where asked), `content_free` (per view, in the question's own order), `model`,
  `latency_s` and `usage` of the state's request (on each of its lines).
- A state is asked again unless all its questions of the types asked have a line without `error`.
  A run may be resumed with other `--types` or `--limit` (each session records its own): on a slow
  machine, one session can ask the score questions of every state and a later one the other types
  of the first states.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from evals.harness import runs
from evals.harness.data import Suite
from evals.harness.transport import connect, post_answers
from evals.jev_dev.dataset import (
    JEV_DEV_SHA256,
    PROTOCOL,
    JevState,
    alone_request,
    content_free_questions,
    distribution,
    load_states,
    question_key,
    renamed_question,
    state_request,
    view_id,
    view_question,
)
from evals.jev_dev.report import write_jev_report
from evals.jev_dev.variants import served_corrections
from openjev.answering.debias import CONTENT_FREE_STATE

CONTENT_FREE_BATCH = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--types", default="noul,choice,score", help="jev-dev: the question types asked (default all three)"
    )


def prediction(question_type: str, probabilities: dict[str, float], answer: dict[str, Any]) -> str:
    """The plain readout's answer as a label: yes/no at p >= 0.5, the returned choice, the most probable level."""
    if question_type == "noul":
        return "yes" if probabilities["yes"] >= 0.5 else "no"
    if question_type == "choice":
        return str(answer["choice"])
    values = list(probabilities.values())
    return str(values.index(max(values)))


def read_content_free(path: Path) -> dict[str, list[float]]:
    return json.loads(path.read_text()) if path.is_file() else {}


async def ask_content_free(
    client: httpx.AsyncClient,
    states: Sequence[JevState],
    known: dict[str, list[float]],
    path: Path,
    calibrated: frozenset[str] = frozenset(),
) -> dict[str, list[float]]:
    """Each distinct question's content-free distribution (`known` ones kept; none of a type in `calibrated`,
    which the server calibrates itself), in the order shown; saved to `path`."""
    questions = content_free_questions(states).items()
    pending = [
        (key, question) for key, question in questions if key not in known and question["type"] not in calibrated
    ]
    for start in tqdm(range(0, len(pending), CONTENT_FREE_BATCH), desc="content-free", unit="batch"):
        batch = pending[start : start + CONTENT_FREE_BATCH]
        questions = {f"cf{index}": question for index, (_, question) in enumerate(batch)}
        request = {"model": PROTOCOL["model"], "state": CONTENT_FREE_STATE, "questions": questions}
        body, _ = await post_answers(client, request)
        for index, (key, question) in enumerate(batch):
            known[key] = list(distribution(question, "plain", body["answers"][f"cf{index}"]).values())
        runs.write_json(path, known)
    return known


def content_free_of(question: dict[str, Any], priors: dict[str, list[float]]) -> dict[str, list[float]]:
    """The content-free distributions of a question's plain (and, for a score, mapped-back `rev`) view."""
    found = {"plain": priors.get(question_key(question))}
    if question["type"] == "score":
        reverse = priors.get(question_key(view_question(question, "rev")))
        found["rev"] = reverse[::-1] if reverse is not None else None
    return {view: values for view, values in found.items() if values is not None}


def state_records(
    state: JevState, body: dict[str, Any], alone: dict[str, Any] | None, priors: dict[str, list[float]], types: set[str]
) -> list[dict[str, Any]]:
    records = []
    for question_id, question in state.questions.items():
        if question["type"] not in types:
            continue
        answers = body["answers"]
        plain = distribution(question, "plain", answers[question_id])
        views = {
            view: distribution(question, view, answers[view_id(question_id, view)])
            for view in state.views(question["type"])
        }
        if question_id == state.renamed and alone is not None:
            renamed = distribution(renamed_question(question), "plain", answers[f"renamed@{question_id}"])
            views["renamed"] = dict(zip(plain, renamed.values(), strict=True))
            views["alone"] = distribution(question, "plain", alone["answers"][question_id])
        gold = state.gold[question_id]
        records.append(
            {
                "id": f"{state.id}/{question_id}",
                "state": state.id,
                "domain": state.domain,
                "subject": state.domain,
                "type": question["type"],
                "fact": gold["fact"],
                "gold": str(gold["gold"]),
                "choice": prediction(question["type"], plain, answers[question_id]),
                "probabilities": plain,
                "views": views,
                "content_free": content_free_of(question, priors),
                "model": body.get("model"),
                "usage": body.get("usage"),
            }
        )
    return records


def kept(state: JevState, types: set[str]) -> JevState:
    """The state with only the question types asked for (`--types`)."""
    questions = {key: value for key, value in state.questions.items() if value["type"] in types}
    gold = {key: state.gold[key] for key in questions}
    return JevState(state.id, state.domain, state.state, questions, gold)


async def ask_state(
    client: httpx.AsyncClient, state: JevState, priors: dict[str, list[float]], types: set[str], first: int, model: str
) -> list[dict[str, Any]]:
    """The state's lines (positions from `first`), or one `error` line per question; asked of `model`."""
    asked = kept(state, types)
    try:
        body, latency = await post_answers(client, state_request(asked, model))
        single = alone_request(asked, model)
        alone = (await post_answers(client, single))[0] if single is not None else None
        records = state_records(asked, body, alone, priors, types)
    except (ValueError, KeyError, TypeError) as error:
        records = [{"id": f"{state.id}/{question_id}", "error": str(error)} for question_id in asked.questions]
        latency = None
    offsets = {question_id: offset for offset, question_id in enumerate(state.questions)}
    for record in records:
        record.update(position=first + offsets[record["id"].rsplit("/", 1)[1]], latency_s=latency)
    return records


def pending_states(states: Sequence[JevState], directory: Path, types: set[str]) -> list[tuple[int, JevState]]:
    """(first position, state) for every state without a full set of answered lines of `types`; failed
    lines dropped. A question's position is its place in the whole suite, whatever the types asked."""
    done = runs.keep_answered(directory)
    pending, position = [], 0
    for state in states:
        ids = [f"{state.id}/{key}" for key in kept(state, types).questions]
        if not set(ids) <= done:
            pending.append((position, state))
        position += len(state.questions)
    return pending


def load_suite() -> Suite:
    """The suite's states, in the generator's order."""
    return Suite("jev-dev", "jev-dev: generated Jev requests, gold by rule", JEV_DEV_SHA256, load_states())


async def evaluate(args: argparse.Namespace, suite: Suite, directory: Path) -> int:
    states = suite.items[: args.limit]
    types = set(args.types.split(","))
    async with connect(args) as (client, models, settings, unread):
        meta = runs.prepare_run(directory, suite, args.url, models, settings, PROTOCOL, args.model, unread=unread)
        started = runs.begin_session(directory, meta, limit=args.limit, types=",".join(sorted(types)))
        served = served_corrections(settings)
        calibrated = frozenset(kind for kind in types if "cc" in served.get(kind, ()))
        note = raw_readouts_note(served, types)
        if note:
            print(note, file=sys.stderr)
        path = directory / "content_free.json"
        asked = [kept(state, types) for state in states]
        priors = await ask_content_free(client, asked, read_content_free(path), path, calibrated)
        pending = pending_states(states, directory, types)
        model = args.model or PROTOCOL["model"]
        ask = functools.partial(ask_unit, client, priors, types, model)
        progress = tqdm(total=len(pending), unit="state")
        errors = await runs.ask_pool(ask, pending, args.concurrency, directory / "results.jsonl", progress)
    runs.end_session(directory, meta, started, len(pending), errors)
    return errors


def raw_readouts_note(served: dict[str, frozenset[str]], types: set[str]) -> str | None:
    """What the server applies itself to the types asked, and how to get raw readouts; None when nothing."""
    applied = {kind: corrections for kind, corrections in served.items() if kind in types}
    if not applied:
        return None
    said = ", ".join(f"{kind}: {'+'.join(sorted(names))}" for kind, names in applied.items())
    return (
        f"note: the server applies {said} itself (its answer settings): those answers are recorded as served, "
        "no content-free readouts are asked for a type it calibrates, and variants without what it applies "
        "(plain among them) are not derived. For raw readouts and every variant, ask a server started with "
        "OPENJEV_CONTEXTUAL_CALIBRATION= (empty), OPENJEV_SCORE_REVERSE=false and OPENJEV_SCORE_TEMPERATURE=1."
    )


async def ask_unit(
    client: httpx.AsyncClient, priors: dict[str, list[float]], types: set[str], model: str, unit: tuple[int, JevState]
) -> list[dict[str, Any]]:
    first, state = unit
    return await ask_state(client, state, priors, types, first, model)


def run_jev_dev(args: argparse.Namespace, suite: Suite) -> int:
    """`evals/run.py jev-dev`: ask, then write the report; exit status as evals/run.py's."""
    directory = Path(args.out)
    errors = runs.guarded(evaluate(args, suite, directory))
    if errors is None:
        return 2
    report = write_jev_report(directory)
    by_type = ", ".join(f"{name} {row['accuracy']:.1%} (n={row['n']})" for name, row in report["by_type"].items())
    print(f"jev-dev: {report['n']} answered, {errors} errors, accuracy {report['accuracy']:.1%}; {by_type}")
    return 1 if errors else 0
