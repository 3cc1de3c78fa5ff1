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

A server may apply corrections itself (`served_corrections`, read from the answer settings in
run.json: OPENJEV_CONTEXTUAL_CALIBRATION's types get `cc`, OPENJEV_SCORE_REVERSE gives scores
`reverse`). Its answers, every view and every content-free readout included, then already carry
them, so a variant is derived only where it keeps every served correction, applying the others:
with c the content-free readouts (as served) and f, r the forward and reversed views,
- served `cc`, wanted `reverse+cc`: combine(f/c_f, mirror(r/c_r)) is the served views combined;
- served `reverse`, wanted `reverse+cc`: the geometric mean commutes with the division, so
  combine(f, mirror r) / combine(c_f, mirror c_r) is the served answer divided by its served
  content-free readout;
- a variant without a served correction (`plain`, or `reverse` on a server calibrating scores)
  cannot be derived from its answers: NotDerivable names the correction. A calibrated type's
  content-free readouts come back uniform (the server divides them by themselves), so they are
  not asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evals.harness.runs import ANSWER_SETTINGS
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


class NotDerivable(ValueError):
    """The variant leaves out a correction the server applied itself: its answers cannot give it."""


def served_corrections(settings: Any) -> dict[str, frozenset[str]]:
    """The corrections a server applies itself, per question type, from its answer settings (None: none known)."""
    if not isinstance(settings, dict):
        return {}
    calibrated = {kind for kind in str(settings.get("contextual_calibration") or "").split(",") if kind in TYPES}
    served = {kind: {"cc"} for kind in calibrated}
    if settings.get("score_reverse"):
        served.setdefault("score", set()).add("reverse")
    return {kind: frozenset(served[kind]) for kind in TYPES if kind in served}


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
    return debiased(record["type"], vectors, priors)


def jev_variant_record(record: dict[str, Any], variant: str, served: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The record as `variant` answers it, from readouts that already carry the `served` corrections."""
    wanted = parse_variant(variant)[record["type"]] - {"plain"}
    if served - wanted:
        raise NotDerivable(
            f"{record['id']}: the server applied {'+'.join(sorted(served))} to {record['type']} questions itself, "
            f"so {variant!r} (without {'+'.join(sorted(served - wanted))}) cannot be derived from its answers"
        )
    corrections = wanted - served
    if not corrections:
        return record
    keys = list(record["probabilities"])
    values = corrected(record, frozenset(corrections))
    return answered_as(record, keys, values, label(record["type"], keys, values))


def jev_variant_records(
    records: Sequence[dict[str, Any]], variant: str, served: Mapping[str, frozenset[str]] | None = None
) -> list[dict[str, Any]]:
    """Every record as `variant` answers it, `served` the server's own corrections per type (module doc)."""
    return [jev_variant_record(record, variant, (served or {}).get(record["type"], frozenset())) for record in records]


def run_variant_records(meta: dict[str, Any], records: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """The registry's hook: the records of the run `meta` as `variant` answers them."""
    return jev_variant_records(records, variant, served_corrections(meta.get(ANSWER_SETTINGS)))
