"""Image placeholders in caller text become the model's vision span, exactly where they stand.

Contract (`ImageMarks`, for one request whose assets are `keys`):
- `mark(value)` replaces every occurrence of an asset key in the strings of a state, instructions or
  criteria value (dict keys and values, at any depth; the longest key first where keys overlap) with a
  marker `[openjev-image-NONCE-i]` (i: the asset's index; NONCE: 64 random bits, fresh per request, so
  caller text cannot spell a marker). Markers are plain ASCII, so they pass JSON serialization and
  the chat template unchanged.
- `split(segments)` cuts rendered prompt segments at the markers: each marker becomes the vision span
  `<|vision_start|><|image_pad|><|vision_end|>` (the served model's own tokens, `VisionSpec`) as
  template text, so it encodes to exactly those three ids, and the asset keys come back in the order
  of their pads. Caller text around it keeps its quoting: text that spells a vision token itself
  (`<|image_pad|>` typed by a caller) is quoted like every added token and stays text, so the only
  pads in a prompt are the images', one per image (the backend's processor expands each).
- `image_part(part)`: a chat message's content part of an image type (`prompts.IMAGE_PART_TYPES`:
  `{"type": "image_url", "image_url": {"url": PLACEHOLDER}}` and the like) whose strings hold
  placeholders is a text part of their markers, so it shows those images where it stands; any other
  part stays as sent (an image part without a placeholder is then refused, naming it).
- `question(q)` is the question with its instructions and criteria descriptions marked, for its
  text only: answers, option names and legends stay as sent. An asset none of whose placeholders
  reaches a prompt (an option name that has a description is not shown) is a 422 naming it.

`PromptImages` does it for a served model: each asset made safe (`request/images.py`), a state with
images framed in full (never through the conversation memo), and per prompt its images in pad order
with the positions they add beyond their pads, `VisionSpec.image_tokens - 1` each, which the token
budgets count. All prompts together may show images in at most OPENJEV_MAX_IMAGE_POSITIONS positions
(a 422 naming `assets` past it): a placeholder repeated costs the backend its image each time. And
the backend loads each image once per call that shows it: those bytes, over every call of the request,
are at most OPENJEV_MAX_IMAGE_BACKEND_BYTES (a 422 naming `assets` past it).
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openjev.affinity import KEY_TOKENS, conversation_key, with_images
from openjev.config import Settings
from openjev.errors import Issue, Loc, RequestRejected
from openjev.prompting.conversation_memo import Framing
from openjev.prompting.memo_windows import NO_CUE
from openjev.prompting.prompts import IMAGE_PART_TYPES, chat_messages, frame_conversation, state_messages
from openjev.prompting.tokenizer import ChatTokenizer, Segment
from openjev.prompting.vision import VisionSpec
from openjev.request.assets import TEXT_ONLY, strings_in
from openjev.request.images import ImageInput, ImagePreparer
from openjev.request.schema import (
    BoxQuestion,
    ChoiceQuestion,
    FreeForm,
    NoulCriteria,
    NoulQuestion,
    ScoreQuestion,
    SystemOneRequest,
)

Question = NoulQuestion | ChoiceQuestion | ScoreQuestion | BoxQuestion


def vision_span(chat: ChatTokenizer, vision: VisionSpec) -> tuple[str, int]:
    """The span that stands for one image, and its pad's id; ValueError when the tokenizer does not read
    it as the model's three special tokens (its tokenizer is not the vision model's)."""
    span = vision.vision_start + vision.image_pad + vision.vision_end
    ids = chat.encode(span)
    pad = chat.tokenizer.token_to_id(vision.image_pad)
    specials = set(chat.special_tokens)
    tokens = (vision.vision_start, vision.image_pad, vision.vision_end)
    if len(ids) != 3 or pad is None or ids[1] != pad or not specials.issuperset(tokens):
        raise ValueError(f"the tokenizer does not read {span!r} as the model's three vision tokens")
    return span, pad


@dataclass(frozen=True)
class ImageMarks:
    keys: tuple[str, ...]
    span: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def __post_init__(self) -> None:
        ordered = sorted(self.keys, key=len, reverse=True)
        object.__setattr__(self, "_index", {key: index for index, key in enumerate(self.keys)})
        object.__setattr__(self, "_keys", re.compile("|".join(map(re.escape, ordered))))
        object.__setattr__(self, "_markers", re.compile(rf"\[openjev-image-{self.nonce}-(\d+)\]"))

    def marker(self, index: int) -> str:
        return f"[openjev-image-{self.nonce}-{index}]"

    def _text(self, text: str) -> str:
        index: dict[str, int] = self._index  # type: ignore[attr-defined]
        return self._keys.sub(lambda match: self.marker(index[match.group()]), text)  # type: ignore[attr-defined]

    def mark(self, value: Any) -> Any:
        """`value` with every asset key in its strings replaced by the asset's marker."""
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            return {self._text(key): self.mark(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.mark(item) for item in value]
        return value

    def image_part(self, part: Any) -> Any:
        if not isinstance(part, Mapping) or part.get("type") not in IMAGE_PART_TYPES:
            return part
        markers = self._markers.findall("\0".join(strings_in(part)))  # type: ignore[attr-defined]
        return {"type": "text", "text": "".join(map(self.marker, map(int, markers)))} if markers else part

    def question(self, question: Question) -> Question:
        criteria: Any = question.criteria
        if isinstance(question, ChoiceQuestion):
            # An option shown by its name (a null description) shows the name's images.
            criteria = {name: self.mark(name if text is None else text) for name, text in question.criteria.items()}
        elif isinstance(criteria, NoulCriteria):
            criteria = NoulCriteria(true=self.mark(criteria.true), false=self.mark(criteria.false))
        elif criteria is not None:
            criteria = self.mark(criteria)
        update = {"instructions": self.mark(question.instructions)}
        # A box has no criteria field to update.
        return question.model_copy(update=update if criteria is None else {**update, "criteria": criteria})

    def split(self, segments: Sequence[Segment]) -> tuple[tuple[Segment, ...], tuple[str, ...]]:
        """The segments with each marker replaced by the vision span, and the keys of the spans in order."""
        out: list[Segment] = []
        keys: list[str] = []
        for text, quoted in segments:
            position = 0
            for match in self._markers.finditer(text):  # type: ignore[attr-defined]
                out += [(text[position : match.start()], quoted), (self.span, False)]
                keys.append(self.keys[int(match[1])])
                position = match.end()
            out.append((text[position:], quoted))
        return tuple(segment for segment in out if segment[0]), tuple(keys)


class PromptImages:
    """The images of requests, for a served model with `vision` (None: it reads text only)."""

    def __init__(self, chat: ChatTokenizer, vision: VisionSpec | None, settings: Settings) -> None:
        self.chat = chat
        self.vision = vision
        self.span, self.pad_id = vision_span(chat, vision) if vision else ("", -1)
        self.preparer = ImagePreparer(settings)
        self.think_model = settings.think_model
        self.max_positions = settings.max_image_positions
        self.max_backend_bytes = settings.max_image_backend_bytes

    def prepare(self, request: SystemOneRequest, sources: Mapping[str, bytes]) -> dict[str, ImageInput]:
        """The request's images made safe (`images.py`), by asset key, after the checks that need no pixel."""
        if not sources:
            return {}
        if self.vision is None:
            raise RequestRejected([TEXT_ONLY])
        if request.model == self.think_model:
            message = f"the thinking tier ({self.think_model}) reads text only; ask jev-latest about images"
            raise RequestRejected([Issue(("assets",), message, "unsupported")])
        forged = self._forged_markup(request)
        if forged:
            raise RequestRejected(forged)
        low = frozenset(key for key, asset in (request.assets or {}).items() if asset.detail == "low")
        return self.preparer.prepare(sources, low)

    def marks(self, safe: Mapping[str, ImageInput]) -> ImageMarks | None:
        """The placeholders' marks of a request's images made safe by `prepare` (None: no images)."""
        return ImageMarks(tuple(safe), self.span) if safe else None

    def _forged_markup(self, request: SystemOneRequest) -> list[Issue]:
        """Caller text that spells a whole vision span. It stays text in the prompt ids, but SGLang
        0.5.19 decodes the ids of a request with images and counts such spans as images
        (`base_processor.load_mm_data`), so one would take another image's place: refused, by field."""
        vision = self.vision
        assert vision is not None
        span = re.compile(re.escape(vision.vision_start) + r"(?:<\|\w+\|>)+" + re.escape(vision.vision_end))
        places: list[tuple[Loc, Any]] = [(("state",), request.state)]
        for question_id, question in request.questions.items():
            places.append((("questions", question_id), question.model_dump(include={"instructions", "criteria"})))
        message = (
            "with images, text may not spell the model's vision markup (a whole vision span): it reads as an image"
        )
        found = [loc for loc, value in places if any(map(span.search, strings_in(value)))]
        return [Issue(loc, message, "vision_markup") for loc in found]

    def framing(self, state: FreeForm, marks: ImageMarks) -> Framing:
        """The question frame of a state with images, rendered in full with its placeholders marked and
        no answer cue (never through the conversation memo: an image is never another's remembered text)."""
        marked = marks.mark(state)  # a copy: its content lists may be changed here
        for message in (chat_messages(marked) or ([], ()))[0]:
            if isinstance(message.get("content"), list):
                message["content"] = [marks.image_part(part) for part in message["content"]]
        return Framing(frame_conversation(self.chat, state_messages(marked), NO_CUE))

    def place(
        self, marks: ImageMarks | None, prompts: Sequence[Sequence[Segment]], safe: Mapping[str, ImageInput]
    ) -> tuple[list[tuple[Segment, ...]], list[tuple[ImageInput, ...]], list[int]]:
        """Each prompt's segments with its vision spans, its images in pad order, and the positions they
        add beyond their pads."""
        if marks is None:
            return [tuple(segments) for segments in prompts], [()] * len(prompts), [0] * len(prompts)
        vision = self.vision
        assert vision is not None  # marks exist only for a vision model
        split = [marks.split(segments) for segments in prompts]
        # A placeholder only in text the prompt does not show (an option's name beside its description,
        # or inside a longer placeholder) would be an image silently ignored.
        unshown = set(marks.keys).difference(*(keys for _, keys in split))
        if unshown:
            message = (
                "the placeholder stands only where the prompt does not show it (an option name that has a "
                "description, or inside a longer placeholder)"
            )
            raise RequestRejected(
                [Issue(("assets", key), message, "asset_unused") for key in marks.keys if key in unshown]
            )
        shown = [tuple(safe[key] for key in keys) for _, keys in split]
        extra = [sum(vision.image_tokens(image.height, image.width) - 1 for image in row) for row in shown]
        self._check_positions([key for _, keys in split for key in keys], safe)
        self._check_backend_bytes(shown)
        return [segments for segments, _ in split], shown, extra

    def _check_backend_bytes(self, shown: Sequence[tuple[ImageInput, ...]]) -> None:
        """OPENJEV_MAX_IMAGE_BACKEND_BYTES: the bytes the backend loads, sum over calls of the bytes of each
        image the call shows; the calls are the warm-up (the shared prefix, `shown[0]`) and one per other
        prompt, which shows the prefix's images and its own."""
        prefix = sum(len(image.data) for image in shown[0])
        loaded = prefix + sum(prefix + sum(len(image.data) for image in row) for row in shown[1:])
        if loaded <= self.max_backend_bytes:
            return
        message = (
            f"the images would make the backend load {loaded} bytes ({len(shown)} calls, each loading every image "
            f"its prompt shows), over OPENJEV_MAX_IMAGE_BACKEND_BYTES={self.max_backend_bytes}; show the images "
            "fewer times, ask fewer questions about them, or send them smaller"
        )
        context = {"limit": self.max_backend_bytes, "bytes": loaded}
        raise RequestRejected([Issue(("assets",), message, "too_long", context)])

    def _check_positions(self, shown_keys: Sequence[str], safe: Mapping[str, ImageInput]) -> None:
        """OPENJEV_MAX_IMAGE_POSITIONS: every image each time a prompt shows it, at its full count. It
        bounds what a few bytes of placeholders make the backend read (and openjev send), image by image."""
        vision = self.vision
        assert vision is not None
        counts = Counter(shown_keys)
        each = {key: vision.image_tokens(safe[key].height, safe[key].width) for key in counts}
        positions = sum(counts[key] * each[key] for key in counts)
        if positions <= self.max_positions:
            return
        shares = ", ".join(f"{key!r} {counts[key]} x {each[key]}" for key in counts)
        message = (
            f"the images take {positions} model positions in the request's prompts ({shares}: times shown x "
            f"positions each), over OPENJEV_MAX_IMAGE_POSITIONS={self.max_positions}; show each image fewer times"
        )
        context = {"limit": self.max_positions, "positions": positions}
        raise RequestRejected([Issue(("assets",), message, "too_long", context)])

    def affinity_key(self, prefix_ids: Sequence[int], header: int, images: tuple[ImageInput, ...]) -> int:
        """`affinity.conversation_key`, with the sha256 of each image whose pad lies in the key's window."""
        window = list(prefix_ids[: header + KEY_TOKENS])
        named = [image.sha256 for image in images[: window.count(self.pad_id)]] if images else []
        return with_images(conversation_key(prefix_ids, header), named)
