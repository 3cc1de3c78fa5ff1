"""The jev-dev suite: reproducible from its generator, sha-checked, balanced, and gold that follows from the text."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import pytest

from evals.harness.data import DataError
from evals.jev_dev import dataset as jev_dev
from evals.jev_dev import gen as jev_dev_gen
from evals.jev_dev.domains import DOMAINS
from evals.jev_dev.templates import Count, Flag, Pick, Rubric


@pytest.fixture(scope="module")
def states() -> tuple[jev_dev.JevState, ...]:
    return jev_dev.load_states()


def test_the_generator_writes_exactly_the_checked_in_file() -> None:
    data = jev_dev_gen.serialise(jev_dev_gen.generate())
    assert data == jev_dev.JEV_DEV.read_bytes()
    assert hashlib.sha256(data).hexdigest() == jev_dev.JEV_DEV_SHA256


def test_a_changed_file_is_refused(tmp_path) -> None:
    changed = tmp_path / "jev-dev.jsonl"
    changed.write_bytes(jev_dev.JEV_DEV.read_bytes().replace(b"router", b"modem", 1))
    with pytest.raises(DataError, match="sha256"):
        jev_dev.load_states(changed)


def test_sizes_and_balance(states) -> None:
    golds = [(state, question_id, gold) for state in states for question_id, gold in state.gold.items()]
    kinds = Counter(gold["type"] for _, _, gold in golds)
    assert len(states) >= 150 and len(golds) >= 1000 and kinds["score"] >= 250
    assert len({state.domain for state in states}) >= 5
    nouls = Counter(gold["gold"] for _, _, gold in golds if gold["type"] == "noul")
    assert abs(nouls["yes"] - nouls["no"]) <= 0.02 * sum(nouls.values())
    levels: dict[int, Counter] = {}
    positions: dict[int, Counter] = {}
    for state, question_id, gold in golds:
        criteria = state.questions[question_id].get("criteria")
        if gold["type"] == "score":
            levels.setdefault(len(criteria), Counter())[gold["gold"]] += 1
        if gold["type"] == "choice":
            positions.setdefault(len(criteria), Counter())[list(criteria).index(gold["gold"])] += 1
    assert set(levels) == {3, 4, 5, 7}
    for size, counts in {**levels, **positions}.items():
        assert set(counts) == set(range(size)), (size, counts)
        assert max(counts.values()) - min(counts.values()) <= 0.2 * max(counts.values()) + 1, (size, counts)
    # A share of the facts needs reading: negations, facts not stated, counts against thresholds.
    facts = Counter(gold["fact"] for _, _, gold in golds)
    assert facts["negated"] >= 50 and facts["absent"] >= 100 and facts["count"] >= 150


TEMPLATES = {domain.name: domain for domain in DOMAINS}


def template_of(domain_name: str, question_id: str) -> Flag | Count | Pick | Rubric:
    domain = TEMPLATES[domain_name]
    kind, number = re.fullmatch(r"([a-z]+)(\d)", question_id).groups()
    pool = {"flag": domain.flags, "count": domain.counts, "pick": domain.picks, "rubric": domain.rubrics}[kind]
    return pool[int(number) - 1]


def stated_number(sentence: str, text: str, name: str = "n") -> int:
    pattern = re.escape(sentence).replace(re.escape(f"{{{name}}}"), r"([\d,]+)")
    return int(re.search(pattern, text).group(1).replace(",", ""))


def test_every_gold_follows_from_the_state_text_by_rule(states) -> None:
    """Re-derive each gold answer from the written state alone, with the templates' rules."""
    for state in states:
        for question_id, gold in state.gold.items():
            template, question = template_of(state.domain, question_id), state.questions[question_id]
            if isinstance(template, Flag):
                expected = "yes" if template.yes in state.state else "no"
                assert not (template.yes in state.state and template.negated in state.state)
            elif isinstance(template, Count):
                threshold = stated_number(template.question, question["instructions"], "t")
                expected = "yes" if stated_number(template.sentence, state.state) > threshold else "no"
            elif isinstance(template, Pick):
                present = [name for name, _, sentence in template.options if sentence and sentence in state.state]
                absent = [name for name, _, sentence in template.options if sentence is None]
                assert len(present) <= 1
                expected = present[0] if present else absent[0]
            else:
                n = stated_number(template.sentence, state.state)
                expected = next(i for i, (_, low, high) in enumerate(template.levels) if low <= n <= high)
            assert gold["gold"] == expected, (state.id, question_id)


def test_one_request_per_state_carries_every_view(states) -> None:
    state = states[0]
    request = jev_dev.state_request(state)
    assert request["state"] == state.state and "gold" not in str(request["questions"])
    for question_id, question in state.questions.items():
        assert request["questions"][question_id] == question
        for view in jev_dev.VIEWS[question["type"]] + jev_dev.LAW_VIEWS[question["type"]]:
            assert f"{question_id}@{view}" in request["questions"]
    assert state.law_state and not states[1].law_state
    other = jev_dev.state_request(states[1])["questions"]
    assert {key.split("@")[1] for key in other if "@" in key} == {"rev"}
    renamed = request["questions"][f"renamed@{state.renamed}"]
    assert list(renamed.get("criteria", [])) != list(state.questions[state.renamed].get("criteria", [])) or (
        state.questions[state.renamed]["type"] != "choice"
    )
    assert jev_dev.alone_request(state)["questions"] == {state.renamed: state.questions[state.renamed]}
    assert jev_dev.alone_request(states[1]) is None and f"renamed@{states[1].renamed}" not in str(states[1])


def test_a_reversed_rubric_is_mapped_back_to_rubric_order() -> None:
    question = {"type": "score", "instructions": "Rate.", "criteria": ["low", "mid", "high"]}
    shown = jev_dev.view_question(question, "rev")
    assert shown["criteria"] == ["high", "mid", "low"]
    answer = {"type": "score", "probabilities": {"0": 0.7, "1": 0.2, "2": 0.1}}
    assert jev_dev.distribution(question, "rev", answer) == {"0": 0.1, "1": 0.2, "2": 0.7}
    with pytest.raises(ValueError):
        jev_dev.distribution(question, "plain", {"type": "score", "probabilities": {"0": 1.0}})


def test_choice_views_keep_the_option_names() -> None:
    question = {"type": "choice", "instructions": "Pick.", "criteria": {"a": "A", "b": "B", "c": "C", "d": "D"}}
    assert list(jev_dev.view_question(question, "rot")["criteria"]) == ["c", "d", "a", "b"]
    assert list(jev_dev.view_question(question, "rev")["criteria"]) == ["d", "c", "b", "a"]
    assert list(jev_dev.view_question(question, "revrot")["criteria"]) == ["b", "a", "d", "c"]
