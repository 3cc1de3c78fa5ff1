"""The model's own tokenizer and chat template, loaded from a local directory.

The directory holds `tokenizer.json` (read by the Rust `tokenizers` library) and
`tokenizer_config.json` whose `chat_template` (or a `chat_template.jinja` file beside it) is rendered
with a sandboxed jinja2 environment built like transformers' chat-template environment: `trim_blocks`,
`lstrip_blocks`, loop controls (`{% break %}`, `{% continue %}`), the `{% generation %}` block (its
body rendered as is), `raise_exception`, `strftime_now`, `dict`, a `namespace` that refuses
underscore names, a `tojson` that keeps non-ASCII text and takes `indent`, `separators` and
`sort_keys`, and the `bos_token`/`eos_token` variables (tested against transformers' own renderer).
Text is encoded without adding special tokens, because the rendered template already contains every
marker the model expects.

Text that the caller wrote is quoted, never markup: where it spells an added token, special
(`<|im_end|>`) or not (Qwen3's `<think>`, `</think>`, `<tool_call>`), `encode_segments` encodes that
stretch with added-token matching off, so a state cannot close its own turn, forge an assistant turn
or open a thinking block. (`tokenizers`' `encode_special_tokens` leaves only special tokens unmatched;
the quoting tokenizer re-declares every added token special.)
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
import jinja2.utils
from jinja2 import nodes
from jinja2.parser import Parser
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Tokenizer

from openjev.config import default_cache_dir
from openjev.prompting.fast_bpe import FastBPE

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

#: A stretch of prompt text and whether it is quoted (caller's text: special tokens read as plain text).
Segment = tuple[str, bool]


class TemplateError(ValueError):
    """The chat template refused the conversation (for example an unsupported role order)."""


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson escapes HTML characters, which a prompt must not get.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class _Namespace(jinja2.utils.Namespace):
    """`namespace(...)` that refuses underscore names, so a template cannot reach CPython internals."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, attrs = args[0], dict(*args[1:], **kwargs)
        for name in attrs:
            _Namespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot set the attribute {name!r}")


class _SandboxEnvironment(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox, with its attribute check remembered per (type, name) for the
    types a chat template reads: JSON data, `namespace` and `loop`. For those the check depends only
    on the type and the name (jinja2 ignores the value; these types have no `__class__` tricks), so
    asking once gives every later answer; it was about half of rendering a long conversation (some
    500 attribute reads for 60 messages)."""

    _MEMO_TYPES = frozenset({str, dict, list, tuple, int, float, bool, type(None), _Namespace, LoopContext})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._safe: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        kind = type(obj)
        if kind not in self._MEMO_TYPES:
            return bool(super().is_safe_attribute(obj, attr, value))
        key = (kind, attr)
        safe = self._safe.get(key)
        if safe is None:
            safe = self._safe[key] = bool(super().is_safe_attribute(obj, attr, value))
        return safe


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering
    shows its body unchanged."""

    tags = frozenset({"generation"})

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _token_text(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


def chat_template_source(directory: Path) -> str:
    """The model's chat template: `chat_template.jinja` (as transformers 5 saves it), else the
    `chat_template` of `tokenizer_config.json`; ValueError when there is none."""
    jinja_file = directory / "chat_template.jinja"
    if jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8")
    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, Mapping)}
        template = named.get("default")
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"{directory} has no chat template (chat_template.jinja or tokenizer_config.json)")
    return template


def _quoting_tokenizer(path: Path) -> Tokenizer:
    """`tokenizer.json` with every added token re-declared special (same id, content and flags) and
    special-token matching off: every added-token spelling is encoded as the plain text it is."""
    quoting = Tokenizer.from_file(str(path))
    quoting.add_special_tokens(
        [
            AddedToken(token.content, single_word=token.single_word, lstrip=token.lstrip, rstrip=token.rstrip,
                       normalized=token.normalized, special=True)
            for token in quoting.get_added_tokens_decoder().values()
            if not token.special
        ]
    )  # fmt: skip
    quoting.encode_special_tokens = True
    return quoting


class ChatTokenizer:
    """Renders conversations with the model's template and turns text into token ids."""

    def __init__(self, directory: Path | str, cache_dir: Path | None = None) -> None:
        directory = Path(directory)
        missing = [name for name in TOKENIZER_FILES if not (directory / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{directory} lacks {', '.join(missing)}; a tokenizer directory needs both")
        self.directory = directory
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # A second instance, so that encoding quoted text never flips a switch other threads see.
        self._quoting = _quoting_tokenizer(directory / "tokenizer.json")
        self._fast = FastBPE.load(directory / "tokenizer.json", self.tokenizer, cache_dir or default_cache_dir())
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        env = _SandboxEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = _tojson
        env.globals["dict"] = dict
        env.globals["namespace"] = _Namespace
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self._template_source = chat_template_source(directory)
        self._template = env.from_string(self._template_source)
        self.special_tokens: tuple[str, ...] = tuple(
            sorted(
                (token.content for token in self.tokenizer.get_added_tokens_decoder().values() if token.special),
                key=len,
                reverse=True,
            )
        )
        self.special_pattern = (
            re.compile("|".join(map(re.escape, self.special_tokens))) if self.special_tokens else None
        )
        added_tokens = self.tokenizer.get_added_tokens_decoder().values()
        added = sorted((token.content for token in added_tokens), key=len)
        self._added_pattern = re.compile("|".join(map(re.escape, reversed(added)))) if added else None
        # Only an added token marked `normalized` is matched on normalised text.
        self._matched_normalized = any(token.normalized for token in added_tokens)

    @property
    def unknown_token_id(self) -> int | None:
        """The id text maps to when the vocabulary lacks it; never a usable answer label."""
        unknown = getattr(self.tokenizer.model, "unk_token", None)
        return self.tokenizer.token_to_id(unknown) if unknown else None

    def ids_below(self, vocab_size: int | None) -> bool:
        """Whether every id this tokenizer can make is below `vocab_size` (None: unknown, so not known to
        be): its largest id counts, since ids need not be contiguous."""
        largest = max(self.tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
        return vocab_size is not None and largest < vocab_size

    def render(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, thinking: bool = False
    ) -> str:
        """Render a conversation, with thinking disabled (unless `thinking`) where the template has the switch."""
        try:
            return self._template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                enable_thinking=thinking,
                tools=None,
                bos_token=self.bos_token or "",
                eos_token=self.eos_token or "",
            )
        except TemplateError:
            raise
        except (jinja2.TemplateError, TypeError, AttributeError, KeyError) as error:
            raise TemplateError(f"the chat template could not render this conversation: {error}") from error

    @property
    def thinking_switch(self) -> bool:
        """Whether the chat template reads `enable_thinking` (Qwen3.x): it has a thinking mode."""
        return "enable_thinking" in self._template_source

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def spells_added_token(self, text: str) -> bool:
        """Whether `text` spells an added token, special or not, before or after normalising (an added
        token marked `normalized` is matched on the normalised text): caller text that does is quoted."""
        if self._added_pattern is None:
            return False
        if self._added_pattern.search(text):
            return True
        normalizer = self.tokenizer.normalizer
        if not self._matched_normalized or normalizer is None or text.isascii():
            return False
        return self._added_pattern.search(normalizer.normalize_str(text)) is not None

    def encode_segments(self, segments: Sequence[Segment]) -> list[int]:
        """Template text with its added tokens; quoted text with added-token strings as plain text."""
        ids: list[int] = []
        for quoted, run in itertools.groupby(segments, key=lambda segment: segment[1]):
            # Adjacent template texts are one text: only quoting changes how a stretch is read.
            texts = [text for text, _ in run]
            encoder = self._quoting if quoted else self.tokenizer
            for text in texts if quoted else ["".join(texts)]:
                ids += encoder.encode(text, add_special_tokens=False).ids
        return ids

    @property
    def fast(self) -> bool:
        """Whether texts without added-token spellings are encoded by tiktoken (see `openjev.prompting.fast_bpe`)."""
        return self._fast is not None

    def encode_batch(self, texts: Sequence[str], *, quoted: bool = False) -> list[list[int]]:
        """Encode on every core; `quoted` texts read added-token spellings as plain text. Texts
        that spell no added token go to the fast encoder where there is one: the ids are the same."""
        encoder = self._quoting if quoted else self.tokenizer
        found: list[list[int] | None] = self._fast.encode_batch(texts) if self._fast else [None] * len(texts)
        left = [texts[index] for index, ids in enumerate(found) if ids is None]
        by_tokenizers = iter(encoder.encode_batch_fast(left, add_special_tokens=False))
        return [ids if ids is not None else next(by_tokenizers).ids for ids in found]
