"""Which readouts a question gets, and how they become its typed answer.

Contract:
- Views. A noul is read once. A choice of at most MAX_SHIFTED_OPTIONS (26) options is read in the
  rotations of OPENJEV_OPTION_SHIFTS (view = the rotation offset), a longer one once. With
  OPENJEV_ROTATION_SKIP_ABOVE below 1 the rotations after the first are `deferred`: read only where
  the first readout is `unsure`, its top probability (calibrated where choice is, T = 1) at most
  the setting. Views that agree average to the first, so a model whose readout depends on the options
  and not on their letters is served the first readout's answer whether or not the rest are read. A score is
  read with its rubric as sent (view 0) and, with OPENJEV_SCORE_REVERSE, with the rubric reversed
  (view REVERSED): exactly the text a client sending the reversed rubric gets, so the two readouts
  are the two sides of the mirror law.
- Labels. Choice options and score levels are lettered A, B, ...; with OPENJEV_SCORE_LABELS=digits
  a rubric of up to as many levels as there are single-token digits (9 in Qwen's vocabulary) is
  numbered 1, 2, ... instead. Nouls read Yes/No. Every label set is checked after the cue it is
  read after (`labels.build_label_set`), at start-up.
- Cues. Each question type ends its turn with its own cue (`Settings.answer_cue_of`).
- Plan. `plan` gives each question view its text, label ids and prompt: the frame's question turn
  around the text, closed by the cue (`prompts.ConversationFrame`), after the frame's shared prefix.
- Boxes. A box question has one view; its turn ends with the opening of the model's grounding format
  (`box_grammar.CUE`) and its read ids are the grammar's digits (`box_reading.py` answers it), and
  it has no content-free readout.
- Contextual calibration (OPENJEV_CONTEXTUAL_CALIBRATION, per type): each view's label logprobs l
  and the same view's content-free logprobs c (content_free.py) give log(divide_prior(softmax l,
  softmax c)) (debias.py), which then goes where l went. A question type not listed is untouched.
- Answer. `answers` gathers each question's readouts from its branches (a box's reading is its answer;
  non-finite label logprobs are the backend's error). Noul and choice answers are answers.py's (a choice
  read in several rotations: each mapped back to its options and the views averaged,
  OPENJEV_ROTATION_AVERAGE); a score read in both views combines the forward distribution and the
  mirrored reversed one in log space (both: debias.combined_views) before the temperature and the
  confidence are applied.
- Temperature. The calibration file's (OPENJEV_CALIBRATION_FILE, read once at start-up) for the
  question's type and option count (2 for a noul), else OPENJEV_SCORE_TEMPERATURE for a score
  question where it is set, else OPENJEV_TEMPERATURE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from openjev.answering.answers import (
    NonFiniteLogprob,
    by_option,
    choice_answer,
    choice_from_probabilities,
    noul_answer,
    renormalise,
    score_answer,
    sharpen,
    shift_offsets,
)
from openjev.answering.box_reading import BoxReading
from openjev.answering.debias import combined_views, divide_prior, log_floor, mirrored
from openjev.backends.base import BackendError, LabelLogprobs
from openjev.calibration import Calibration, load_calibration
from openjev.config import Settings
from openjev.options import AnswerCue, ScoreLabels
from openjev.prompting.box_grammar import CUE as BOX_CUE
from openjev.prompting.image_marks import ImageMarks
from openjev.prompting.labels import LabelSet, build_label_set
from openjev.prompting.option_order import shown_question
from openjev.prompting.prompts import ConversationFrame, frame_conversation
from openjev.prompting.question_texts import ANSWER_CUES, box_text, choice_text, noul_text, score_text
from openjev.prompting.tokenizer import ChatTokenizer, Segment
from openjev.request.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, ScoreQuestion

AnswerableQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion
#: Any question of a request: the readout types and boxes.
AnyQuestion = AnswerableQuestion | BoxQuestion
#: The view of a score question whose rubric is shown reversed.
REVERSED = -1
#: (view, label logprobs, content-free label logprobs or None) for each readout of one question.
Readout = tuple[int, Sequence[float], Sequence[float] | None]


class Viewed(Protocol):
    """A branch: one view of one question."""

    question_id: str
    question: AnyQuestion
    offset: int


#: Choices of more options are read once, whatever OPENJEV_OPTION_SHIFTS says: rotations were chosen
#: on decisions-dev's 3-6 options, and a second reading of a long list doubles the cost of its longest
#: prompt (255 options: two readouts of about 3,000 tokens each on the embedded model).
MAX_SHIFTED_OPTIONS = 26


class QuestionViews:
    """The views, texts, labels and cues of questions under one server's settings; built once at start-up."""

    def __init__(self, settings: Settings, chat: ChatTokenizer) -> None:
        self.settings, self.chat = settings, chat
        #: The ids a box generation reads (its grammar's digits, set by the engine; (): boxes refused).
        self.box_ids: tuple[int, ...] = ()
        self.cues = {kind: settings.answer_cue_of(kind) for kind in ("noul", "choice", "score")}
        count = max(settings.max_choice_options, settings.max_score_levels)
        self.labels: dict[AnswerCue, LabelSet] = {}
        for cue in set(self.cues.values()):
            # Labels are checked where they are read: right after the answer cue of a question turn.
            context = frame_conversation(chat, [{"role": "user", "content": "?"}], ANSWER_CUES[cue]).turn_close
            self.labels[cue] = build_label_set(chat, context, count)
        self.calibrated = frozenset(filter(None, settings.contextual_calibration.split(",")))
        self.calibration: Calibration | None = (
            load_calibration(settings.calibration_file) if settings.calibration_file is not None else None
        )

    def cue(self, question: AnswerableQuestion) -> AnswerCue:
        return self.cues[question.type]

    def cue_text(self, question: AnyQuestion) -> str:
        """What ends the question's turn: its type's answer cue, or a box's grounding format opening."""
        return BOX_CUE if isinstance(question, BoxQuestion) else ANSWER_CUES[self.cue(question)]

    def views(self, question: AnyQuestion) -> list[int]:
        if _single(question):
            return [0]  # one option or level reads the same in every view
        if isinstance(question, ChoiceQuestion):
            count = len(question.criteria)
            return shift_offsets(count, self.settings.option_shifts if count <= MAX_SHIFTED_OPTIONS else 1)
        if isinstance(question, ScoreQuestion) and self.settings.score_reverse:
            return [0, REVERSED]
        return [0]

    def shown(self, question: AnyQuestion) -> AnyQuestion:
        """The question with its options in the order they are lettered (OPENJEV_OPTION_ORDER)."""
        if isinstance(question, ChoiceQuestion):
            return shown_question(question, self.settings.option_order)
        return question

    def text(self, question: AnyQuestion, view: int, marks: ImageMarks | None = None) -> tuple[str, tuple[int, ...]]:
        """The question turn's text in `view` and the label token ids read after it; `marks`: the text shows
        the request's images (the options ordered by their texts as sent)."""
        question = self.shown(question)
        if marks is not None:
            question = marks.question(question)
        if isinstance(question, BoxQuestion):
            return box_text(question), self.box_ids
        labels, style = self.labels[self.cue(question)], self.settings.worked_examples
        if isinstance(question, NoulQuestion):
            return noul_text(question, style), labels.yes_no_ids
        count = len(question.criteria)
        if isinstance(question, ChoiceQuestion):
            keys = self.settings.option_keys
            return choice_text(question, labels.option_labels[:count], view, style, keys), labels.option_label_ids[
                :count
            ]
        if self.settings.score_labels is ScoreLabels.digits and count <= len(labels.digit_labels):
            names, ids = labels.digit_labels[:count], labels.digit_label_ids[:count]
        else:
            names, ids = labels.option_labels[:count], labels.option_label_ids[:count]
        return score_text(question, names, reverse=view == REVERSED, style=style), ids

    def plan(
        self, questions: Mapping[str, AnyQuestion], frame: ConversationFrame, marks: ImageMarks | None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Segment, ...]]]:
        """Each question view's (id, question, view, text, label ids), and every prompt's segments, the
        shared prefix of `frame` first; `marks`: the texts show the request's images (the questions
        stay as sent)."""
        planned = [
            (question_id, question, view, *self.text(question, view, marks))
            for question_id, question in questions.items()
            for view in self.views(question)
        ]
        # The frame carries no cue: each question type's closes its turn, right before the label.
        suffixes = (
            frame.with_cue(self.cue_text(question)).question_suffix_segments(text, self.chat.spells_added_token(text))
            for _, question, _, text, _ in planned
        )
        return planned, [frame.shared_prefix_segments, *suffixes]

    def deferred(self, question: AnyQuestion, view: int) -> bool:
        """A choice's rotation after the first, read only where the first readout is `unsure`."""
        return isinstance(question, ChoiceQuestion) and view != 0 and self.settings.rotation_skip_above < 1

    def unsure(self, readout: Readout) -> bool:
        """The first readout of a choice leaves room for its other rotations to change the answer; an unusable
        one is read on, and `answers` refuses it."""
        _, logprobs, prior = readout
        try:
            return max(renormalise(calibrated(logprobs, prior))) <= self.settings.rotation_skip_above
        except NonFiniteLogprob:
            return True

    def wants_content_free(self, question: AnyQuestion) -> bool:
        # The setting names readout types only (`config.QUESTION_TYPES`): never a box. One option or
        # level has probability 1 whatever its prior.
        return question.type in self.calibrated and not _single(question)

    def answers(
        self,
        branches: Sequence[Viewed],
        results: Sequence[LabelLogprobs | BoxReading],
        priors: Sequence[Sequence[float] | None],
    ) -> tuple[dict[str, list[Readout]], dict[str, dict[str, Any]]]:
        """Each question's readouts from its branches' results and content-free priors, view 0 first,
        and each question's typed answer (a box's is its reading's), in the order of `branches`."""
        questions: dict[str, AnyQuestion] = {}
        readouts: dict[str, list[Readout]] = {}
        boxes: dict[str, dict[str, Any]] = {}
        for branch, result, prior in zip(branches, results, priors, strict=True):
            questions[branch.question_id] = branch.question
            if isinstance(result, BoxReading):
                boxes[branch.question_id] = result.answer
            else:
                readouts.setdefault(branch.question_id, []).append((branch.offset, result.logprobs, prior))
        try:
            answers = {
                qid: boxes[qid] if qid in boxes else self.answer(question, readouts[qid])  # type: ignore[arg-type]
                for qid, question in questions.items()
            }
        except NonFiniteLogprob as error:
            raise BackendError(f"the backend returned unusable label logprobs: {error}") from error
        return readouts, answers

    def temperature(self, question: AnswerableQuestion) -> float:
        if self.calibration is not None:
            count = 2 if isinstance(question, NoulQuestion) else len(question.criteria)
            fitted = self.calibration.temperature(question.type, count)
            if fitted is not None:
                return fitted
        if isinstance(question, ScoreQuestion) and self.settings.score_temperature is not None:
            return self.settings.score_temperature
        return self.settings.temperature

    def answer(self, question: AnswerableQuestion, readouts: Sequence[Readout]) -> dict[str, Any]:
        """The typed answer from the question's readouts, its first view first (module doc)."""
        mode, temperature = self.settings.confidence, self.temperature(question)
        logprobs = [calibrated(values, prior) for _, values, prior in readouts]
        views = [view for view, _, _ in readouts]
        if isinstance(question, NoulQuestion):
            return noul_answer(logprobs[0], temperature)
        if isinstance(question, ChoiceQuestion):
            names = list(self.shown(question).criteria)
            if views == [0]:
                return in_callers_order(question, choice_answer(names, logprobs[0], temperature, mode))
            rotations = [by_option(values, view) for values, view in zip(logprobs, views, strict=True)]
            combined = combined_views(question.type, rotations, self.settings.rotation_average)
            return in_callers_order(question, choice_from_probabilities(names, sharpen(combined, temperature), mode))
        if views == [0]:
            return score_answer(question.criteria, logprobs[0], temperature, mode)
        forward, backward = (renormalise(values) for values in logprobs)
        combined = combined_views(question.type, [forward, mirrored(backward)], self.settings.rotation_average)
        return score_answer(question.criteria, log_floor(combined), temperature, mode)


def in_callers_order(question: ChoiceQuestion, answer: dict[str, Any]) -> dict[str, Any]:
    """A choice answer with its probabilities listed in the caller's option order (each under its own key)."""
    probabilities = answer["probabilities"]
    return {**answer, "probabilities": {name: probabilities[name] for name in question.criteria}}


def calibrated(logprobs: Sequence[float], prior: Sequence[float] | None) -> Sequence[float]:
    """Label logprobs with the content-free prior divided out (as log probabilities), or as they are."""
    if prior is None:
        return logprobs
    return log_floor(divide_prior(renormalise(logprobs), renormalise(prior)))


def _single(question: AnyQuestion) -> bool:
    """A choice of one option or a score of one level: answered with probability 1 (`answers.py`)."""
    return isinstance(question, ChoiceQuestion | ScoreQuestion) and len(question.criteria) == 1
