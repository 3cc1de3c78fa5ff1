"""Supervised data parallelism, end to end: `OPENJEV_DATA_PARALLEL_SIZE=2` launches the stand-in SGLang
with `--dp-size 2` (one radix cache per rank), and every call of a conversation reaches one rank."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests.backends.test_supervised import StandIn, stand_in, supervised  # noqa: F401 - fixtures
from tests.test_data_parallel import conversation

CONVERSATIONS = 12
TURNS = 3
CALLS_PER_REQUEST = 1 + 3  # the warm-up and one branch per question


def calls_by_conversation(log: Path, tokenizer: Tokenizer, turns: list[int]) -> dict[int, list[list[dict]]]:
    """The stand-in's calls, per conversation (named in its opening) and per turn (the log's length
    after each turn is in `turns`)."""
    lines = log.read_text().splitlines()
    grouped: dict[int, list[list[dict]]] = defaultdict(lambda: [[] for _ in turns])
    for number, line in enumerate(lines):
        call = json.loads(line)
        ticket = re.search(r"Ticket (\d+):", tokenizer.decode(call["input_ids"], skip_special_tokens=False))
        if ticket is None:  # openjev's readiness probe
            continue
        turn = next(index for index, end in enumerate(turns) if number < end)
        grouped[int(ticket.group(1))][turn].append(call)
    return grouped


def test_each_conversation_stays_on_one_of_two_ranks(
    supervised: Any,  # noqa: F811
    stand_in: StandIn,  # noqa: F811
    qwen_tokenizer_dir: Path,
) -> None:
    # Every turn warms up (no skip over a held prefix) and reads each choice once: the counts below.
    env = {"OPENJEV_DATA_PARALLEL_SIZE": "2", "OPENJEV_WARM_PREFIX_SHARE": "0", "OPENJEV_OPTION_SHIFTS": "1"}
    server = supervised("--frontend", "python", env=env)
    assert stand_in.flags()["--dp-size"] == "2"
    log = Path(f"{stand_in.record_path}.calls")
    turns = []
    with server.client() as client:
        assert client.get("/v1/limits").json()["data_parallel_size"] == 2
        for turn in range(1, TURNS + 1):
            for index in range(CONVERSATIONS):
                response = client.post("/v1/systemone", json=conversation(index, turn))
                assert response.status_code == 200, response.text
            turns.append(len(log.read_text().splitlines()))
        health = client.get("/health").json()["data_parallel"]
    grouped = calls_by_conversation(log, Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json")), turns)

    assert sorted(grouped) == list(range(CONVERSATIONS))
    ranks = {}
    for index, by_turn in grouped.items():
        calls = [call for turn in by_turn for call in turn]
        assert len(calls) == TURNS * CALLS_PER_REQUEST
        assert all(call["routed_dp_rank"] in (0, 1) and call["rank"] == call["routed_dp_rank"] for call in calls)
        (ranks[index],) = {call["rank"] for call in calls}  # every call of the conversation on one rank
        previous = 0
        for turn in by_turn:
            warm_up = min(turn, key=lambda call: len(call["input_ids"]))
            # The warm-up finds the previous turn's prefix, every branch the warm-up's: one cache served all.
            assert warm_up["cached_tokens"] >= previous
            assert all(call["cached_tokens"] >= len(warm_up["input_ids"]) for call in turn if call is not warm_up)
            previous = len(warm_up["input_ids"])
    assert set(ranks.values()) == {0, 1}, ranks  # both ranks serve
    assert all(rank["in_flight_calls"] == 0 and rank["cached_share"] > 0.5 for rank in health["ranks"])
