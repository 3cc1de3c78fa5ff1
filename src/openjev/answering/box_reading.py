"""Box questions: one short constrained generation per box over the cached prefix, read as `boxes.py` says.

Contract:
- Accepted where the served model sees (`Backend.vision`) and its tokenizer writes the box format one
  digit a token (`BoxGrammar.of`, built once per engine, capped for the model's grounding scale);
  elsewhere a box question is a 422 naming it (`validation.py`). A box locates in the request's one
  image, which the state or the box's own instructions show. The thinking tier refuses images, so it
  never sees a box.
- The call: `GenerationCall` over the request's shared prefix and the box's question turn (which ends
  in the grammar's cue), at most the grammar's `max_tokens`, greedy, the turn's end ids as stop ids,
  the grammar as `constraint`, its digit ids as `read_ids`, the prompt's images and the evaluation's
  rank; it holds one of the engine's backend slots like every call.
- The answer: the generated ids parsed (`BoxGrammar.parse`; one trailing id the backend stopped on
  accepted), each digit position's read logprobs its distribution, then `edges_of` and `box_answer`
  in the image's grounding extent (`VisionSpec.grounding_extent`). A backend that reads no logprobs
  gives the greedy box with confidence null; a generation that is not a box is a BackendError (502).
- Cost: its prompt tokens count in `usage.input_tokens`, every generated id in `usage.output_tokens`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openjev.affinity import Pin
from openjev.answering.boxes import box_answer, edges_of
from openjev.backends.base import Backend, BackendError, GenerationCall, new_rid
from openjev.backends.slots import BackendSlots
from openjev.prompting.box_grammar import BoxFormatError, BoxGrammar
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.images import ImageInput

log = logging.getLogger("openjev.answering.box_reading")


@dataclass(frozen=True, slots=True)
class BoxReading:
    """One box question's answer and what its generation cost."""

    answer: dict[str, Any]
    prompt_tokens: int
    cached_tokens: int | None
    generated: int


class BoxReader:
    """Box questions on an engine's backend (module doc)."""

    def __init__(self, chat: ChatTokenizer, backend: Backend, slots: BackendSlots, stop_ids: Sequence[int]) -> None:
        """`slots`: the engine's backend slots; `stop_ids`: the ids that end the model's turn."""
        self.backend, self.slots, self.stop_ids = backend, slots, list(stop_ids)
        self.vision = backend.vision
        self.grammar: BoxGrammar | None = None
        if self.vision is not None:
            try:
                self.grammar = BoxGrammar.of(chat, self.vision.largest_coordinate)
            except BoxFormatError as error:
                log.warning("the model sees, but box questions are refused: %s", error)

    @property
    def accepted(self) -> bool:
        return self.grammar is not None

    @property
    def read_ids(self) -> tuple[int, ...]:
        """The ids read at every generated position (the digits); () where boxes are refused."""
        return self.grammar.read_ids if self.grammar is not None else ()

    @property
    def max_tokens(self) -> int:
        return self.grammar.max_tokens if self.grammar is not None else 0

    async def read(self, input_ids: Sequence[int], images: tuple[ImageInput, ...], pin: Pin) -> BoxReading:
        """The box of the prompt `input_ids` (which shows `images`, the request's one image first), read on
        the evaluation's data-parallel rank."""
        grammar, vision = self.grammar, self.vision
        if grammar is None or vision is None or not images:
            raise BackendError("a box question reached a deployment or a prompt that cannot answer it")
        call = GenerationCall(
            new_rid(), input_ids, grammar.max_tokens, self.stop_ids, routed_dp_rank=pin.rank, images=images,
            constraint=grammar, read_ids=grammar.read_ids,
        )  # fmt: skip
        async with self.slots:
            generation = await self.backend.generate(call)
        output, read = generation.output_ids, generation.read_logprobs
        # SGLang's grammar ends on one of the model's end-of-sequence ids, whichever it picks (not
        # necessarily one of ours): the id the backend says it stopped on.
        stopped_on = output[-1:] if generation.finish_reason == "stop" else ()
        try:
            positions = grammar.parse(output, stopped_on)
        except ValueError as error:
            raise BackendError(f"the backend's box generation is not a box: {error}") from error
        digits = [grammar.digits(output, places) for places in positions]
        distributions = [[read[place] for place in places] if read else [] for places in positions]
        image = images[0]
        answer = box_answer(edges_of(digits, distributions), vision.grounding_extent(image.height, image.width))
        pin.record(generation.prompt_tokens, generation.cached_tokens)
        return BoxReading(answer, generation.prompt_tokens, generation.cached_tokens, len(output))
