"""Every setting of openjev, read from `OPENJEV_*` environment variables (CLI flags mirror them).

One class: the CLI builds a `Settings` from the environment and overrides the fields the user passed
as flags, so `OPENJEV_PORT=9000 openjev serve` and `openjev serve --port 9000` agree. It holds what is
served, the HTTP server and admission; the groups a stage reads on its own (the backends, the readout
and the thinking tier, images, tasks) are classes of `openjev.settings` that it inherits.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from openjev.settings.backends import BackendSettings
from openjev.settings.images import ImageSettings
from openjev.settings.readout import ReadoutSettings
from openjev.settings.tasks import TaskSettings

#: Public model id on SGLang when OPENJEV_SERVED_MODEL_NAME is unset; the NVFP4 repository is only the weight source.
DEFAULT_SERVED_MODEL_NAME = "Qwen/Qwen3.6-35B-A3B"


class Settings(BackendSettings, ReadoutSettings, ImageSettings, TaskSettings):
    model_config = SettingsConfigDict(env_prefix="OPENJEV_", extra="ignore")

    # What is served.
    model: str = Field(
        "nvidia/Qwen3.6-35B-A3B-NVFP4",
        description="Weights SGLang loads (supervised mode) and whose tokenizer is fetched when none is given.",
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit) of OPENJEV_MODEL.")
    served_model_name: str | None = Field(
        None,
        description="Public model id returned in responses; default: Qwen/Qwen3.6-35B-A3B for SGLang, "
        "the embedded model's own name for the embedded backend.",
    )
    model_release_date: str | None = Field(
        None, description="release_date reported by /v1/models (YYYY-MM-DD); default: the day openjev started."
    )
    model_aliases: list[str] = Field(default_factory=list, description="Extra names accepted in a request's `model`.")
    openai_model_aliases: list[str] = Field(
        default_factory=lambda: ["gpt-6-luna"],
        description="Model names of OpenAI's Decisions API accepted for the served model (every route) and "
        "listed by /v1/models.",
    )
    tokenizer: Path | None = Field(
        None, description="Local directory with tokenizer.json and tokenizer_config.json (chat template)."
    )
    local_model: str | None = Field(
        None,
        description="Embedded backend: a local Hugging Face directory, a local .gguf file, or a hub repo id; "
        "default: the packaged Qwen2.5-Coder-1.5B-Instruct.",
    )
    cache_dir: Path | None = Field(
        None,
        description="Where converted embedded weights and the tokenizer checks' verdicts are kept "
        "(default ~/.cache/openjev).",
    )

    # The HTTP server.
    host: str = Field("127.0.0.1", description="Address the API binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port the API binds to.")
    api_key: SecretStr | None = Field(
        None, description="Require `Authorization: Bearer <key>` when set; an empty key is refused at start."
    )
    body_read_timeout: float = Field(
        30.0, gt=0, description="Seconds a client gets to send its whole request body; 408 past it."
    )
    max_concurrent_body_reads: int = Field(
        32,
        ge=1,
        description="Bodies received at once; one more ends the slowest read held 1 s or more, else gets 529 unread.",
    )
    max_connections: int = Field(
        1000, ge=2, description="Connections open at once; past it the oldest one waiting for a head is closed."
    )
    max_body_bytes_in_flight: int = Field(
        512 * 1024 * 1024, ge=1024, description="Body bytes held at once, received and decoded; past it 529."
    )

    # Admission and budgets.
    # Caps on every route over each contract's counts, by default at or above them (docs/clients.md).
    max_questions: int = Field(200, ge=1, description="Questions per request, on every route.")
    max_choice_options: int = Field(255, ge=2, le=255, description="Options per choice question, on every route.")
    max_score_levels: int = Field(64, ge=2, le=255, description="Levels per score (/v1/decisions: 10 at most).")
    max_examples_per_option: int = Field(32, ge=0, description="Worked examples in a {what, examples} entry.")
    max_example_bytes: int = Field(16384, ge=1, description="UTF-8 bytes of text in one worked example.")
    max_body_bytes: int = Field(2 * 1024 * 1024, ge=1024, description="Body size without images.")
    max_input_tokens: int = Field(32768, ge=16, description="Tokens per question call without the long-context header.")
    max_long_context_tokens: int | None = Field(
        None, ge=16, description="Tokens per question call with the long-context header; unset: the model's context."
    )
    max_total_input_tokens: int | None = Field(
        None, ge=16, description="Tokens a request makes the backend compute; unset: twice the per-question budget."
    )
    max_concurrent_requests: int = Field(16, ge=1, description="Evaluations at once; more get 529.")
    max_concurrent_preparations: int = Field(
        2, ge=1, description="Requests being rendered and tokenized at once (worker threads); more get 529."
    )
    max_concurrent_image_preparations: int = Field(
        2,
        ge=1,
        description="Requests whose images are being decoded and resized at once (worker threads, slots of their "
        "own: image work never takes a text request's preparation slot).",
    )
    image_preparation_queue: int = Field(
        8, ge=0, description="Requests with images that wait for an image preparation slot; more get 529."
    )
    inline_preparation_bytes: int = Field(
        16 * 1024,
        ge=0,
        description="A request that brings at most this many bytes of new text (its decoded body; for a chat "
        "or text state that extends or repeats one prepared before, its new messages with the template's markup "
        "around each, and every question's texts) is prepared on the event loop, in a preparation slot: handing "
        "it to a worker thread costs more than preparing it; 0: every request on a worker thread.",
    )
    max_concurrent_branches: int = Field(
        64, ge=1, description="Readouts and generations in flight at the backend, process-wide; a batch counts each."
    )
    warm_prefix_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="The shared prefix's warm-up readout is skipped while the prefix is certainly in SGLang's "
        "prefix cache: sent to the same rank before, with at most this share of its KV pool (/server_info "
        "max_total_num_tokens) sent since; 0: every request awaits its warm-up.",
    )
    request_timeout: float = Field(120.0, gt=0, description="Seconds for the backend work of one request.")
    retry_after: int = Field(1, ge=0, description="Seconds suggested in Retry-After on 503 and 529.")

    tokenize_cache_bytes: int = Field(
        256 * 1024**2, ge=0, description="Bytes of tokenized text pieces kept, so a repeated text is tokenized once."
    )
    conversation_memo_bytes: int = Field(
        64 * 1024**2,
        ge=0,
        description="Bytes of prepared conversations kept, so a conversation that grows renders and tokenizes "
        "only its new messages; 0 renders every conversation in full.",
    )

    # Operations.
    profile: str | None = Field(None, description="Free-form deployment profile name, reported by /health.")
    log_level: str = Field("info", description="Log level of openjev and uvicorn.")

    @model_validator(mode="after")
    def _one_body_of_each_cap_fits_in_flight(self) -> Settings:
        largest = max(self.max_body_bytes, self.max_image_body_bytes)
        if self.max_body_bytes_in_flight < largest:
            raise ValueError(
                f"OPENJEV_MAX_BODY_BYTES_IN_FLIGHT={self.max_body_bytes_in_flight} holds no body of the largest "
                f"size a route takes ({largest} bytes): set it at least that high"
            )
        return self

    @field_validator("api_key")
    @classmethod
    def _no_empty_api_key(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty key would make `Authorization: Bearer ` (an empty token) a valid credential.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("OPENJEV_API_KEY is empty: set a key, or unset it to serve without auth")
        return value


def served_model_name(settings: Settings, backend_model_name: str | None) -> str:
    """The public model id: OPENJEV_SERVED_MODEL_NAME, else the backend's own, else the SGLang default."""
    return settings.served_model_name or backend_model_name or DEFAULT_SERVED_MODEL_NAME


def default_cache_dir() -> Path:
    """`$OPENJEV_CACHE_DIR`, else `$XDG_CACHE_HOME/openjev`, else `~/.cache/openjev`."""
    if explicit := os.environ.get("OPENJEV_CACHE_DIR"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "openjev"
