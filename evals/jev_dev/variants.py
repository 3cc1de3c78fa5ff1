"""Offline variants of a `jev-dev` run: what a server with the label-bias settings would have answered.

Every results line holds its extra views and content-free readouts (asking.py), and a server
reads each view exactly as the harness's request shows it, so the server's own maths
(`openjev.answering.debias`) gives each setting's answer offline:

- `reverse`: score questions combine the plain and the reversed rubric in log space
  (OPENJEV_SCORE_REVERSE);
- `cc`: contextual calibration, each view divided by its content-free readout
  (OPENJEV_CONTEXTUAL_CALIBRATION);

A variant is written `reverse+cc` (for every question type it applies to) or per type,
`score:reverse+cc,noul:cc` (types left out stay plain); `plain` is the run's own answer. A variant
record is the record with `choice` and `probabilities` replaced (evals/harness/variants.py), so the
report's figures and evals/compare.py apply unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evals.harness.variants import answered_as
from openjev.answering.answers import argmax_first
from openjev.answering.debias import debiased

CORRECTIONS = frozenset({"plain", "reverse", "cc"})
TYPES = ("noul", "choice", "score")


def parse_variant(variant: str) -> dict[str, frozenset[str]]:
    """The corrections per question type of a variant name (module doc); ValueError names what is unknown."""
    if ":" not in variant:
        parts = [(kind, variant) for kind in TYPES]
    else:
        parts = [tuple(part.split(":", 1)) for part in variant.split(",")]  # type: ignore[misc]
    spec = {kind: frozenset({"plain"}) for kind in TYPES}
    for kind, corrections in parts:
        names = frozenset(corrections.split("+"))
        if kind not in TYPES or not names <= CORRECTIONS:
            raise ValueError(f"unknown jev-dev variant {variant!r}: types {TYPES}, corrections {sorted(CORRECTIONS)}")
        spec[kind] = names
    return spec


def label(question_type: str, keys: Sequence[str], probabilities: Sequence[float]) -> str:
    if question_type == "noul":
        return "yes" if probabilities[0] >= 0.5 else "no"
    return keys[argmax_first(probabilities)]


def corrected(record: dict[str, Any], corrections: frozenset[str]) -> list[float]:
    """The distribution, in the record's key order, after the corrections that apply to its type."""
    keys = list(record["probabilities"])
    views = ["plain"]
    if "reverse" in corrections and record["type"] == "score":
        views.append("rev")
    readouts = [record["probabilities"] if view == "plain" else record["views"][view] for view in views]
    vectors = [[readout[key] for key in keys] for readout in readouts]
    priors = [record["content_free"].get(view) if "cc" in corrections else None for view in views]
    if "cc" in corrections and any(prior is None for prior in priors):
        raise ValueError(f"{record['id']} has no content-free readout for {views}")
    return debiased(vectors, priors)


def jev_variant_record(record: dict[str, Any], variant: str) -> dict[str, Any]:
    corrections = parse_variant(variant)[record["type"]]
    if corrections == {"plain"}:
        return record
    keys = list(record["probabilities"])
    values = corrected(record, corrections)
    return answered_as(record, keys, values, label(record["type"], keys, values))


def jev_variant_records(records: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    return [jev_variant_record(record, variant) for record in records]
