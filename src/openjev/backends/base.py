"""The backend contract: one required method, `readout`, and optional ones, `readout_batch` and `generate`.

A backend receives a fully tokenized prompt and the token ids of the answer labels, and returns
the natural-log probabilities the model assigns to each of those ids as the *first* token after the
prompt (a log-softmax over the whole vocabulary, before any renormalisation over the labels).
`readout` generates nothing else; `generate` (the thinking tier's call 1, see `openjev.answering.thinking`)
decodes up to `max_new_tokens` ids after a prompt, greedily (`temperature` 0) or sampled with a
seed, stopping after one of `stop_token_ids` (which stays in `output_ids`). Everything above this
line (templates, labels, budgets, readout maths) is shared by every backend, so the HTTP API cannot
tell backends apart except by speed. `readout_batch` answers readouts that go out together (an
evaluation's branches), in order, exactly as `readout` answers each; by default each is its own
concurrent `readout`, and a backend whose server can take them in one request overrides it.

Lifecycle hooks (`start`, `health`, `aclose`) have working defaults; a backend overrides what it
needs. Failures are reported with the `BackendError` family; the HTTP layer maps each to one status.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from openjev.errors import OpenJevError
from openjev.prompting.vision import VisionSpec

# Defined where images are made safe (request/images.py); every backend call carries them.
from openjev.request.images import ImageInput as ImageInput


def new_rid() -> str:
    # Fixed-length unique ids: SGLang's scheduler matches aborts by rid prefix.
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class ReadoutCall:
    """One single-token readout: `input_ids` is the whole prompt, `label_token_ids` the ids to read.

    `routed_dp_rank`: the data-parallel rank every call of one request is pinned to (`affinity.py`);
    None where the backend has one rank, and then nothing about ranks is sent.
    """

    rid: str
    input_ids: Sequence[int]
    label_token_ids: Sequence[int]
    #: The caller vouches that every id is in [0, the backend's `vocab_size`), so the backend need
    #: not scan the prompt again (about 0.4 ms for each 24k-id readout).
    ids_in_vocabulary: bool = False
    routed_dp_rank: int | None = None
    #: One entry per image pad in `input_ids`, in order (the backend's processor expands each pad).
    images: tuple[ImageInput, ...] = ()
    #: Return the hidden state at the answer position too (`LabelLogprobs.hidden_state`), read in the
    #: same forward; only a backend whose `hidden_states` is available takes it.
    hidden_state: bool = False


@dataclass(frozen=True, slots=True)
class LabelLogprobs:
    """The answer to a `ReadoutCall`.

    `logprobs[i]` is log P(first token = label_token_ids[i] | prompt). `prompt_tokens` is the
    prompt length the backend processed; `cached_tokens` how many of those it reused from a cache,
    or None when the backend does not say (never a made-up 0).
    """

    logprobs: tuple[float, ...]
    prompt_tokens: int
    cached_tokens: int | None
    #: The model's final hidden state (after its last norm, the vector the output head reads) at the
    #: prompt's last position, float32; None unless the call asked for it.
    hidden_state: np.ndarray | None = field(default=None, compare=False)
    #: The most probable first token over the whole vocabulary (SGLang's greedy sampled id, which at
    #: temperature 0 is the argmax; the embedded models' argmax of the row they read); None where the
    #: backend does not say.
    top_token: int | None = None


@dataclass(frozen=True, slots=True)
class HiddenStates:
    """Whether a backend returns hidden states with its readouts (`ReadoutCall.hidden_state`), from which
    layer, and where it does not, what enables them (shown in /health, /v1/limits and refusals)."""

    available: bool
    layer: str = "final"
    enable: str | None = None

    def public(self) -> dict[str, Any]:
        """As /health and /v1/limits show it."""
        return {"available": self.available, "layer": self.layer, "enable": self.enable}


class TokenConstraint(Protocol):
    """A language the generated ids must stay in: as a regular expression over the generated text
    (SGLang's `regex` sampling constraint) and as the ids allowed after a valid prefix (a logits mask);
    () once the generation is complete."""

    regex: str

    def allowed_after(self, generated: Sequence[int]) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class GenerationCall:
    """Decode up to `max_new_tokens` ids after `input_ids`; `temperature` 0 is greedy, else sampled
    with `seed` (reproducible on one backend). With `constraint` every id is one it allows; with
    `read_ids` the logprobs of those ids are read at every generated position."""

    rid: str
    input_ids: Sequence[int]
    max_new_tokens: int
    stop_token_ids: Sequence[int]
    temperature: float = 0.0
    seed: int | None = None
    #: The data-parallel rank to run on (None: one rank, nothing routed), as `ReadoutCall`'s.
    routed_dp_rank: int | None = None
    #: As `ReadoutCall.images`.
    images: tuple[ImageInput, ...] = ()
    constraint: TokenConstraint | None = None
    read_ids: Sequence[int] = ()


@dataclass(frozen=True, slots=True)
class Generation:
    """The answer to a `GenerationCall`: the generated ids (a matched stop id last), the prompt length
    processed, the reused prompt tokens (None: not reported) and why it ended (`stop` or `length`)."""

    output_ids: tuple[int, ...]
    prompt_tokens: int
    cached_tokens: int | None
    finish_reason: str
    #: Per generated position, the logprobs of the call's `read_ids` (in their order); () when none
    #: were asked for.
    read_logprobs: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class BackendHealth:
    ready: bool
    detail: dict[str, Any] = field(default_factory=dict)


class BackendError(OpenJevError):
    """The backend failed in a way the caller cannot fix (HTTP 502)."""

    error_type = "backend_error"


class BackendUnavailable(BackendError):
    """The backend is not reachable or not ready yet (HTTP 503 with Retry-After)."""

    error_type = "backend_unavailable"


class BackendTimeout(BackendError):
    """The backend did not answer within the request timeout (HTTP 504)."""

    error_type = "backend_timeout"


class HiddenStatesUnavailable(BackendError):
    """A readout asked for the hidden state of a backend that does not return it (HTTP 502)."""

    error_type = "hidden_states_unavailable"


#: What enables hidden states where a backend has none.
NO_HIDDEN_STATES = "serve with the embedded backend or an SGLang started with --return-hidden-states-mode last"


class Backend(abc.ABC):
    """Base class of every backend. Only `readout` is required."""

    #: Human-readable kind, reported by /health.
    kind: str = "backend"

    @abc.abstractmethod
    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        """Return the label log-probabilities at the first position after `call.input_ids`.

        Cancelling the awaiting task must stop the work (or abort it on the server) before
        the cancellation propagates.
        """

    async def readout_batch(self, calls: Sequence[ReadoutCall]) -> list[LabelLogprobs]:
        """`readout` of every call, answered in order. The first failure is raised and cancels the others;
        cancelling stops every call as `readout` does."""
        if len(calls) == 1:
            return [await self.readout(calls[0])]
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self.readout(call)) for call in calls]
        except* BackendError as failures:
            raise failures.exceptions[0] from None
        return [task.result() for task in tasks]

    #: The thinking budget used when OPENJEV_THINK_BUDGET_TOKENS is unset (the published probe's 1,024).
    default_think_budget: int = 1024

    async def generate(self, call: GenerationCall) -> Generation:
        """Decode after `call.input_ids` (see `GenerationCall`); cancelling stops the work like `readout`."""
        raise BackendError(f"the {self.kind} backend cannot generate")

    @property
    def hidden_states(self) -> HiddenStates:
        """Whether readouts can carry the hidden state; none by default."""
        return HiddenStates(False, enable=NO_HIDDEN_STATES)

    def refuse_hidden_states(self, calls: Sequence[ReadoutCall]) -> None:
        """BackendError when a call asks for hidden states this backend does not return."""
        support = self.hidden_states
        if not support.available and any(call.hidden_state for call in calls):
            raise HiddenStatesUnavailable(f"the {self.kind} backend returns no hidden states: {support.enable}")

    @property
    def context_length(self) -> int | None:
        """Largest prompt + output length the backend accepts, when it knows one."""
        return None

    @property
    def vocab_size(self) -> int | None:
        """Ids the model has, when the backend knows and checks them (see `ReadoutCall.ids_in_vocabulary`)."""
        return None

    @property
    def prefix_cache_tokens(self) -> int | None:
        """Tokens one rank's prefix cache holds (evicting least recently used first), when known; None
        where the backend keeps no shared prefix cache or does not say (`warm_prefixes.py`)."""
        return None

    @property
    def data_parallel_size(self) -> int:
        """Data-parallel ranks, each with its own prefix cache, that calls can be pinned to."""
        return 1

    @property
    def vision(self) -> VisionSpec | None:
        """The served model's vision tokens and processor bounds; None where it reads text only."""
        return None

    @property
    def model_name(self) -> str | None:
        """The real model's public name, when the backend knows it (used as the served name)."""
        return None

    @property
    def tokenizer_dir(self) -> Path | None:
        """A local directory with the model's tokenizer.json and tokenizer_config.json, if known."""
        return None

    async def start(self) -> None:
        """Prepare for traffic (load a model, wait for a server). Called once before serving."""

    async def health(self) -> BackendHealth:
        """Report readiness now; the default backend is always ready."""
        return BackendHealth(ready=True)

    async def aclose(self) -> None:
        """Release resources; no work may outlive this call."""
