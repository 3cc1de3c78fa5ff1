"""The embedded backend's vision path: a local image-text-to-text checkpoint run with the text path's reuse.

A checkpoint whose config.json has a `vision_config` (Qwen2.5-VL, Qwen3-VL, Qwen3.5) is loaded with
transformers' `AutoModelForImageTextToText` and its own image processor (`AutoImageProcessor` from its
preprocessor_config.json; without torchvision that is the PIL one). `VisionSpec` is built from the same
processor and tokenizer, so the prompt side counts an image exactly as this module expands it.

Expansion. A call carries one `<|image_pad|>` per image and `images` in the same order. `expand` swaps
each pad for the image's n positions, n = grid_h * grid_w / merge_size**2 from the processor's own
`get_number_of_image_patches` (arithmetic on the image's size; the pixels are processed on the worker
thread, which checks that the grid it gets is the one expanded). Each position holds the image's marker,
`-1 - int(sha256[:15], 16)`: a negative number no token id can equal, the same for every position of one
image and different for another image. The expanded ids are the call's `input_ids` from then on, so the
prefix cache and the batching keys see an image by its content: the same image reuses, a different one
never does, and `prompt_tokens`/`cached_tokens` count image positions like SGLang's. A cached key never
ends inside an image: every stored prompt holds its images whole, and a key that is a prefix of a prompt
starts each of its marker runs where the prompt's run starts.

Positions. Qwen-VL models use 3-D rotary positions (temporal, height, width). Text advances all three by
one a token; an image of grid (1, h, w) takes positions start + (0, row, column) over its h/m x w/m merged
patches and moves the next position on by max(h, w) / m, so after a prompt of L ids the next position is
L + rope_delta. The model keeps `rope_deltas` on itself for its own `generate`; this module never relies
on that. Every run passes explicit positions: the model's `get_rope_index` over the ids being run (which
starts at 0) plus the cached prefix's next position, kv.get_seq_length() + kv.rope_delta. That is exact
because every position the rule gives is start + something independent of start. The run then adds its
own delta to kv.rope_delta: the position state lives on the KV object itself, so every copy the backend
makes (the deep copy per call, the per-row repeat of a batch) carries it with the cached entry.

Branches over one prefix run as one batch like text (`forward_rows`): suffixes right-padded with id 0,
their images in row order, positions from `get_rope_index` over the padded rows (padding continues a
row's text positions and is never attended to by that row's real tokens). The prefix's KV is repeated per
row by `repeat_rows`, which also repeats the conv and recurrent states of Qwen3.5's gated-delta layers.
A single prompt and `generate` go through the text paths with `BoundVision` standing in for the model.
The vision tower runs on the images of the ids being run: a state's images once, in the warm-up; an
image in a question's suffix in that question's branch.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from openjev.backends.base import BackendError, GenerationCall, ImageInput, ReadoutCall
from openjev.backends.embedded.batching import rows_of
from openjev.backends.embedded.conversion import ModelSourceError
from openjev.prompting.vision import VisionSpec, grounding_of

if TYPE_CHECKING:
    from openjev.backends.embedded.batching import Batch, Row

CallT = TypeVar("CallT", ReadoutCall, GenerationCall)

#: The id a batch pads its shorter suffixes with (never attended to; any id but the image pad does).
PAD_ID = 0


def image_marker(image: ImageInput) -> int:
    """The id every position of `image` has in cache keys: negative, so never a token id."""
    return -1 - int(image.sha256[:15], 16)


def rope_delta(kv: Any) -> int:
    """Next 3-D position minus the ids the cache holds (0 for a cache no vision run has touched)."""
    return getattr(kv, "rope_delta", 0)


@dataclass(slots=True)
class VisionModel:
    """A loaded image-text-to-text model, its image processor, and what the prompt side must know."""

    torch: Any
    lm: Any
    processor: Any
    spec: VisionSpec
    image_token_id: int
    cache_kwarg: str

    def image_tokens(self, image: ImageInput) -> int:
        """Positions `image` takes: its merged grid as the processor computes it."""
        patches = self.processor.get_number_of_image_patches(image.height, image.width)
        return patches // self.processor.merge_size**2

    def expand(self, call: CallT) -> CallT:
        """`call` with each image pad replaced by its image's marker positions (see the module docstring)."""
        ids, pad = call.input_ids, self.image_token_id
        pads = ids.count(pad)
        if pads != len(call.images):
            raise BackendError(f"the prompt has {pads} image pads but {len(call.images)} images came with it")
        if not pads:
            return call
        expanded: list[int] = []
        at = 0
        for image in call.images:
            found = ids.index(pad, at)
            expanded += ids[at:found]
            expanded += [image_marker(image)] * self.image_tokens(image)
            at = found + 1
        expanded += ids[at:]
        return replace(call, input_ids=tuple(expanded))

    def bound(self, call: ReadoutCall | GenerationCall) -> BoundVision:
        """The model seen through the text model's call, for an expanded call's images."""
        return BoundVision(self, {image_marker(image): image for image in call.images})

    def forward_rows(self, batch: Batch) -> list[Row]:
        """The row after each job's prompt, all rows in one pass over the shared prefix's copy."""
        assert batch.prefix is not None
        kv = copy.deepcopy(batch.prefix.kv)
        repeat_rows(kv, len(batch.jobs))
        images = {image_marker(image): image for job in batch.jobs for image in job.call.images}
        suffixes = [list(job.call.input_ids[batch.prefix_length :]) for job in batch.jobs]
        return self.rows(kv, suffixes, images)

    def rows(self, kv: Any, suffixes: list[list[int]], images: dict[int, ImageInput]) -> list[Row]:
        """Run `suffixes` (expanded ids, one row each) after the state in `kv`; the row at each one's end.

        With one row, `kv` then holds the state after it, its `rope_delta` updated."""
        torch = self.torch
        rows, longest = len(suffixes), max(map(len, suffixes))
        ids = torch.full((rows, longest), PAD_ID, dtype=torch.long)
        shown: list[ImageInput] = []
        for row, suffix in enumerate(suffixes):
            shown += self._images_in(suffix, images)
            ids[row, : len(suffix)] = torch.tensor([self.image_token_id if t < 0 else t for t in suffix])
        start = kv.get_seq_length() + rope_delta(kv)
        with torch.inference_mode():
            inputs, positions, deltas = self._positions(ids, shown)
            hidden = self.lm.model(
                input_ids=ids, position_ids=positions + start, use_cache=True, **inputs, **{self.cache_kwarg: kv}
            ).last_hidden_state
            last = hidden[torch.arange(rows), torch.tensor([len(suffix) - 1 for suffix in suffixes])]
            found = rows_of(torch, self.lm, last)
        if rows == 1:
            kv.rope_delta = rope_delta(kv) + int(deltas[0])
        return found

    def _positions(self, ids: Any, shown: list[ImageInput]) -> tuple[dict[str, Any], Any, Any]:
        """The model inputs of the images, 3-D positions from 0 and each row's rope delta, for `ids`."""
        torch = self.torch
        if not shown:
            rows, length = ids.shape
            return {}, torch.arange(length).view(1, 1, -1).expand(3, rows, -1), torch.zeros(rows, dtype=torch.long)
        pixels = self.processor(images=[_decoded(image) for image in shown], return_tensors="pt")
        grid = pixels["image_grid_thw"]
        expected = [self.image_tokens(image) for image in shown]
        if (got := (grid.prod(-1) // self.processor.merge_size**2).tolist()) != expected:
            raise BackendError(f"the image processor made {got} image positions where {expected} were expanded")
        types = (ids == self.image_token_id).int()
        positions, deltas = self.lm.model.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=grid)
        inputs = {"pixel_values": pixels["pixel_values"], "image_grid_thw": grid}
        return inputs, positions, deltas.view(-1)

    def _images_in(self, suffix: Sequence[int], images: dict[int, ImageInput]) -> list[ImageInput]:
        """The images whose positions `suffix` holds, in order (it starts at an image boundary)."""
        found: list[ImageInput] = []
        if not suffix or min(suffix) >= 0:
            return found
        at = 0
        while at < len(suffix):
            if suffix[at] < 0:
                found.append(images[suffix[at]])
                at += self.image_tokens(found[-1])
            else:
                at += 1
        return found


@dataclass(frozen=True, slots=True)
class BoundVision:
    """`lm(input_ids=..., use_cache=True, logits_to_keep=1, cache=kv)` as the text paths call a model, run
    by the vision model with one call's images (by marker): one row, at its last position. The "logits"
    are already log-probabilities, which the callers' log_softmax leaves as they are (logsumexp is 0)."""

    vision: VisionModel
    images: dict[int, ImageInput]

    def __call__(self, *, input_ids: Any, **kwargs: Any) -> SimpleNamespace:
        (row,) = self.vision.rows(kwargs[self.vision.cache_kwarg], [input_ids[0].tolist()], self.images)
        return SimpleNamespace(logits=row.logprobs[None, None])


def repeat_rows(kv: Any, rows: int) -> None:
    """`kv.batch_repeat_interleave(rows)`, linear-attention layers included (Qwen3.5's gated-delta layers,
    which transformers 5.24 gives no such method): their conv and recurrent states repeated on dim 0."""
    for layer in kv.layers:
        if hasattr(layer, "batch_repeat_interleave"):
            layer.batch_repeat_interleave(rows)
            continue
        for states in (layer.conv_states, layer.recurrent_states):
            for index, state in states.items():
                if state is not None:
                    states[index] = state.repeat_interleave(rows, dim=0)


def load_vision(torch: Any, path: Path, dtype: str, cache_kwarg: Callable[[Callable[..., Any]], str]) -> VisionModel:
    """Load the checkpoint at `path` with its image processor; `cache_kwarg(forward)` names the cache argument."""
    try:
        from tokenizers import Tokenizer
        from transformers import AutoImageProcessor, AutoModelForImageTextToText
    except ImportError as exc:
        raise BackendError(f"loading a vision checkpoint needs transformers' image classes ({exc})") from exc
    processor = AutoImageProcessor.from_pretrained(str(path))
    lm = AutoModelForImageTextToText.from_pretrained(str(path), dtype=getattr(torch, dtype, dtype))
    lm.eval()
    config, tokenizer = lm.config, Tokenizer.from_file(str(path / "tokenizer.json"))

    def token(token_id: int) -> str:
        text = tokenizer.id_to_token(token_id)
        if text is None:
            raise ModelSourceError(f"{path}: the vision token id {token_id} is not in its tokenizer")
        return text

    spec = VisionSpec(
        vision_start=token(config.vision_start_token_id),
        image_pad=token(config.image_token_id),
        vision_end=token(config.vision_end_token_id),
        patch_size=processor.patch_size,
        merge_size=processor.merge_size,
        min_pixels=processor.size.shortest_edge,
        max_pixels=processor.size.longest_edge,
        grounding=grounding_of(config.model_type),
    )
    return VisionModel(torch, lm, processor, spec, config.image_token_id, cache_kwarg(lm.model.forward))


def _decoded(image: ImageInput) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(image.data)) as opened:
        return opened.convert("RGB")
