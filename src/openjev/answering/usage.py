"""`usage`: what the caller sent and got, each counted once, whatever calls openjev made to answer it.

- `input_tokens` = P + Σ_q s_q: the shared prefix once (P: the state and the chat template around it,
  its images' positions included) and each question's own prompt once (s_q: its suffix in the view it
  was sent in, the options as sent: the question turn's template, its text, the answer cue, its
  images' positions). The warm-up, content-free readouts, option rotations, a reversed rubric and the
  thinking tier's calls are openjev's own work: they show in the `x-openjev-backend-*` headers and in
  `/metrics`, never in the bill.
- `output_tokens`: one per question (its answer), every id a box's generation wrote, and what the
  thinking tier generated (its reasoning tokens).
- `cached_tokens` (the share of `input_tokens` the backend held from earlier requests): the prefix's,
  min(P, c_warm) where the warm-up ran and reported c_warm, else min(P, min_q c_q); plus each question's
  suffix tokens found cached, min(s_q, max(0, c_q - P)), where c_q is what its readout reported. None
  where the backend reports none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

#: One question's (own prompt tokens s_q, output tokens, cached tokens c_q its readout reported).
QuestionCount = tuple[int, int, int | None]


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int
    #: Of `input_tokens`, those the backend held from earlier requests; None: the backend reports none.
    cached_tokens: int | None

    def with_reasoning(self, tokens: int) -> Usage:
        return replace(self, output_tokens=self.output_tokens + tokens)


def billed(prefix: int, questions: Sequence[QuestionCount], warmed: bool, warm_cached: int | None) -> Usage:
    """The usage of a first pass (module doc): `prefix` = P; `questions`, one count per question;
    `warmed`: the warm-up ran, and reported `warm_cached`."""
    reported = [cached for _, _, cached in questions]
    input_tokens = prefix + sum(own for own, _, _ in questions)
    output_tokens = sum(output for _, output, _ in questions)
    if None in reported or (warmed and warm_cached is None):
        return Usage(input_tokens, output_tokens, None)
    counts = [cached for cached in reported if cached is not None]
    prefix_cached = min(prefix, warm_cached if warm_cached is not None else min(counts, default=0))
    suffixes_cached = sum(min(own, max(0, cached - prefix)) for own, _, cached in questions if cached is not None)
    return Usage(input_tokens, output_tokens, prefix_cached + suffixes_cached)
