"""Ask a Jev `/v1/systemone` the `jev-dev` suite (evals/jev_dev.py) and record one line per question.

Called by `uv run evals/run.py jev-dev --url URL --out DIR` (same retries, resuming and run.json
checks as the other suites; `--limit N` means the first N states, `--types` the question types kept).

Contract:
- First, DIR/content_free.json: {question key: the content-free distribution, in the order shown},
  each distinct question text asked once over CONTENT_FREE_STATE, CONTENT_FREE_BATCH a request.
- Then per state, one request with every question and view (jev_dev.state_request), and one more
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
import asyncio
import functools
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from evals.jev_dev import (
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
from evals.report import read_results
from evals.run import RunRefused, fetch_answer_settings, fetch_models, prepare_run, send_with_retry, write_json
from evals.suites import Suite
from openjev.answering.debias import CONTENT_FREE_STATE

CONTENT_FREE_BATCH = 16


def prediction(question_type: str, probabilities: dict[str, float], answer: dict[str, Any]) -> str:
    """The plain readout's answer as a label: yes/no at p >= 0.5, the returned choice, the most probable level."""
    if question_type == "noul":
        return "yes" if probabilities["yes"] >= 0.5 else "no"
    if question_type == "choice":
        return str(answer["choice"])
    values = list(probabilities.values())
    return str(values.index(max(values)))


async def post(client: httpx.AsyncClient, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
    response, _, latency = await send_with_retry(lambda: client.post("/v1/systemone", json=request))
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}: {response.text[:300]}")
    return response.json(), latency


def read_content_free(path: Path) -> dict[str, list[float]]:
    return json.loads(path.read_text()) if path.is_file() else {}


async def ask_content_free(
    client: httpx.AsyncClient, states: Sequence[JevState], known: dict[str, list[float]], path: Path
) -> dict[str, list[float]]:
    """Each distinct question's content-free distribution (`known` ones kept), in the order shown; saved to `path`."""
    pending = [(key, question) for key, question in content_free_questions(states).items() if key not in known]
    for start in tqdm(range(0, len(pending), CONTENT_FREE_BATCH), desc="content-free", unit="batch"):
        batch = pending[start : start + CONTENT_FREE_BATCH]
        questions = {f"cf{index}": question for index, (_, question) in enumerate(batch)}
        body, _ = await post(client, {"model": PROTOCOL["model"], "state": CONTENT_FREE_STATE, "questions": questions})
        for index, (key, question) in enumerate(batch):
            known[key] = list(distribution(question, "plain", body["answers"][f"cf{index}"]).values())
        write_json(path, known)
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
        body, latency = await post(client, state_request(asked, model))
        single = alone_request(asked, model)
        alone = (await post(client, single))[0] if single is not None else None
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
    answered = [record for record in read_results(directory) if "error" not in record]
    done = {record["id"] for record in answered}
    with (directory / "results.jsonl").open("w") as handle:
        handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in answered)
    pending, position = [], 0
    for state in states:
        ids = [f"{state.id}/{key}" for key in kept(state, types).questions]
        if not set(ids) <= done:
            pending.append((position, state))
        position += len(state.questions)
    return pending


def start_session(
    directory: Path, suite: Suite, args: argparse.Namespace, models: Any, types: set[str], settings: Any
) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    meta = prepare_run(directory, suite, args.url, models, settings=settings, protocol=PROTOCOL, model=args.model)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    meta["sessions"].append({"started": started, "limit": args.limit, "types": ",".join(sorted(types))})
    write_json(directory / "run.json", meta)
    return meta


async def evaluate(args: argparse.Namespace, directory: Path) -> int:
    states = load_states()[: args.limit]
    types = set(args.types.split(","))
    suite = Suite("jev-dev", "jev-dev: generated Jev requests, gold by rule", JEV_DEV_SHA256, ())
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=600.0) as client:
        try:
            models = await fetch_models(client)
        except httpx.TransportError as error:
            raise RunRefused(f"{args.url} cannot be reached: {error!r}") from error
        meta = start_session(directory, suite, args, models, types, await fetch_answer_settings(client))
        started = time.monotonic()
        path = directory / "content_free.json"
        priors = await ask_content_free(client, [kept(state, types) for state in states], read_content_free(path), path)
        pending = pending_states(states, directory, types)
        model = args.model or PROTOCOL["model"]
        ask = functools.partial(ask_state, client, priors=priors, types=types, model=model)
        errors = await ask_states(ask, pending, args.concurrency, directory / "results.jsonl")
    meta["sessions"][-1].update(
        asked=len(pending), errors=errors, finished=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_s=round(time.monotonic() - started, 1),
    )  # fmt: skip
    write_json(directory / "run.json", meta)
    return errors


async def ask_states(
    ask: Callable[..., Awaitable[list[dict[str, Any]]]],
    pending: Sequence[tuple[int, JevState]],
    concurrency: int,
    results: Path,
) -> int:
    """Ask the pending states (`ask(state=..., first=...)`: `ask_state` with the rest given), `concurrency`
    at a time, appending their lines as they come; the error count."""
    queue = iter(pending)
    errors = 0
    with results.open("a") as handle, tqdm(total=len(pending), unit="state") as progress:

        async def worker() -> None:
            nonlocal errors
            for first, state in queue:
                records = await ask(state=state, first=first)
                handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
                handle.flush()
                errors += sum("error" in record for record in records)
                progress.update()

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    return errors


def run_jev_dev(args: argparse.Namespace) -> int:
    """`evals/run.py jev-dev`: ask, then write the report; exit status as evals/run.py's."""
    from evals.jev_report import write_jev_report

    directory = Path(args.out)
    try:
        errors = asyncio.run(evaluate(args, directory))
    except RunRefused as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    except (httpx.TransportError, ExceptionGroup) as error:
        unreachable = error.subgroup(httpx.TransportError) if isinstance(error, ExceptionGroup) else error
        if unreachable is None:
            raise
        print(f"stopped, the server is unreachable: {unreachable!r}; run again to resume", file=sys.stderr)
        return 2
    report = write_jev_report(directory)
    by_type = ", ".join(f"{name} {row['accuracy']:.1%} (n={row['n']})" for name, row in report["by_type"].items())
    print(f"jev-dev: {report['n']} answered, {errors} errors, accuracy {report['accuracy']:.1%}; {by_type}")
    return 1 if errors else 0
