"""A prepared request's first pass sent (the engine's step 2): every readout branch and the content-free
readouts they need as one batch, beside one constrained generation per box question; a choice's
deferred rotations follow as a second batch where its first readout is unsure (`readouts.py`,
OPENJEV_ROTATION_SKIP_ABOVE), with the priors the first batch read reused. The readout of a question
as sent (view 0) asks for the hidden state at the answer position where the request wants it
(`PreparedRequest.hidden`); no other does.

Every call goes to the evaluation's data-parallel rank (`affinity.Pin`), which records its counts, and
holds one of the backend slots (`backends/slots.py`): a batch goes out in chunks of the slots free.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from openjev.affinity import Pin
from openjev.answering.box_reading import BoxReader, BoxReading
from openjev.answering.content_free import ContentFreePriors
from openjev.answering.evaluation import Branch, PreparedRequest
from openjev.answering.readouts import QuestionViews
from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall, new_rid
from openjev.backends.slots import BackendSlots
from openjev.prompting.prompt_ids import PromptIds, SharedIds
from openjev.request.images import ImageInput
from openjev.request.schema import BoxQuestion


class BranchReader:
    """Reads branches for the engine; shares its views, priors, box reader, backend and slots."""

    def __init__(
        self,
        views: QuestionViews,
        content_free: ContentFreePriors,
        boxes: BoxReader,
        backend: Backend,
        slots: BackendSlots,
        ids_in_vocabulary: bool,
    ) -> None:
        self.views, self.content_free, self.boxes = views, content_free, boxes
        self.backend, self.slots = backend, slots
        #: The tokenizer fits the backend's model: its ids need no check there (`ReadoutCall`).
        self.ids_in_vocabulary = ids_in_vocabulary

    async def fan_out(
        self, prefix: SharedIds, prepared: PreparedRequest, pin: Pin
    ) -> tuple[list[Branch], list[LabelLogprobs | BoxReading], list[tuple[float, ...] | None], int, int]:
        """The branches read, in order (`_readouts`), their answers and content-free priors, and the priors'
        calls and prompt tokens: the readouts beside each box's generation."""
        branches, seen = prepared.branches, prepared.prefix_images
        boxed = [index for index, branch in enumerate(branches) if isinstance(branch.question, BoxQuestion)]
        async with asyncio.TaskGroup() as group:
            readouts = group.create_task(self._readouts(prefix, prepared, pin))
            boxes = [
                group.create_task(
                    self.boxes.read(PromptIds(prefix, branches[i].suffix_ids), seen + branches[i].images, pin)
                )
                for i in boxed
            ]
        read, calls, tokens = readouts.result()
        found: dict[int, tuple[LabelLogprobs | BoxReading, tuple[float, ...] | None]] = dict(read)
        found.update({index: (task.result(), None) for index, task in zip(boxed, boxes, strict=True)})
        order = sorted(found)
        return [branches[i] for i in order], [found[i][0] for i in order], [found[i][1] for i in order], calls, tokens

    async def _readouts(
        self, prefix: SharedIds, prepared: PreparedRequest, pin: Pin
    ) -> tuple[dict[int, tuple[LabelLogprobs, tuple[float, ...] | None]], int, int]:
        """Each readout branch read, by its index: (its answer, its content-free prior); the priors' calls and
        prompt tokens. Every branch but the deferred rotations goes out at once; a deferred rotation follows
        where its question's first readout is unsure (`readouts.py`)."""
        branches = prepared.branches
        readable = [index for index, branch in enumerate(branches) if not isinstance(branch.question, BoxQuestion)]
        first = [
            index for index in readable if not self.views.deferred(branches[index].question, branches[index].offset)
        ]
        found, calls, tokens = await self._read_round(prefix, prepared, first, {}, pin)
        firsts = {
            branches[i].question_id: (0, answer.logprobs, prior)
            for i, (answer, prior) in found.items()
            if branches[i].offset == 0
        }
        later = [i for i in readable if i not in found and self.views.unsure(firsts[branches[i].question_id])]
        if later:
            keys = prepared.content_free.keys
            known = {
                key: prior for i, (_, prior) in found.items() if (key := keys[i]) is not None and prior is not None
            }
            more, more_calls, more_tokens = await self._read_round(prefix, prepared, later, known, pin)
            found, calls, tokens = found | more, calls + more_calls, tokens + more_tokens
        return found, calls, tokens

    async def _read_round(
        self,
        prefix: SharedIds,
        prepared: PreparedRequest,
        indices: list[int],
        known: dict[bytes, tuple[float, ...]],
        pin: Pin,
    ) -> tuple[dict[int, tuple[LabelLogprobs, tuple[float, ...] | None]], int, int]:
        """The readouts of the branches at `indices` and the content-free readouts they still need, together;
        `known`: the priors earlier rounds read."""
        plan = prepared.content_free.part(indices, known)
        seen = prepared.prefix_images
        calls = [
            replace(
                self._readout_call(PromptIds(prefix, b.suffix_ids), b.label_token_ids, pin, seen + b.images),
                hidden_state=b.offset == 0 and b.question_id in prepared.hidden,
            )
            for b in (prepared.branches[index] for index in indices)
        ]
        calls += [self._readout_call(ids, labels, pin) for ids, labels in self.content_free.requests(plan)]
        answered = await self._call_batch(calls, pin) if calls else []
        mine, theirs = answered[: len(indices)], answered[len(indices) :]
        priors, prior_calls, prior_tokens = self.content_free.priors(plan, theirs)
        return dict(zip(indices, zip(mine, priors, strict=True), strict=True)), prior_calls, prior_tokens

    def _readout_call(
        self, input_ids: Sequence[int], label_token_ids: tuple[int, ...], pin: Pin, images: tuple[ImageInput, ...] = ()
    ) -> ReadoutCall:
        """A readout on the evaluation's rank; `images`: one per image pad of `input_ids`, in order."""
        return ReadoutCall(new_rid(), input_ids, label_token_ids, self.ids_in_vocabulary, pin.rank, images)

    async def warm_up(self, prefix: SharedIds, prepared: PreparedRequest, pin: Pin) -> LabelLogprobs:
        """One readout of the shared prefix alone, so the backend's prefix cache holds it."""
        # Any non-empty id list works: every call must carry one (SGLang #34719).
        labels = prepared.branches[0].label_token_ids[:1]
        call = self._readout_call(PromptIds(prefix, []), labels, pin, prepared.prefix_images)
        [result] = await self._call_batch([call], pin)
        return result

    async def _call_batch(self, calls: list[ReadoutCall], pin: Pin) -> list[LabelLogprobs]:
        """Readouts that go out together, one slot each, in chunks of the slots free; every answer's counts
        recorded on the rank."""
        results = await self.slots.in_chunks(calls, self.backend.readout_batch)
        for result in results:
            pin.record(result.prompt_tokens, result.cached_tokens)
        return results
