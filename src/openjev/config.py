"""Every setting of openjev, read from `OPENJEV_*` environment variables (CLI flags mirror them).

One class, one place: the CLI builds a `Settings` from the environment and overrides the fields the
user passed as flags, so `OPENJEV_PORT=9000 openjev serve` and `openjev serve --port 9000` agree.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from openjev.image_settings import ImageSettings
from openjev.options import (
    QUESTION_TYPES,
    SGLANG_FLAGS_SET_BY_OPENJEV,
    AnswerCue,
    ConfidenceMode,
    EmbeddedPrecision,
    Frontend,
    RotationAverage,
    ScoreLabels,
    WorkedExamples,
)
from openjev.tasks.settings import TaskSettings

#: The SDKs' default model name; always accepted as an alias of the served model.
COMPAT_MODEL_ALIAS = "jev-latest"
#: The SGLang release openjev is verified on in production (a GPU); 0.5.23 runs the CPU test suites too.
DEFAULT_SGLANG_VERSION = "0.5.19"
#: Public model id on SGLang when OPENJEV_SERVED_MODEL_NAME is unset; the NVFP4 repository is only the weight source.
DEFAULT_SERVED_MODEL_NAME = "Qwen/Qwen3.6-35B-A3B"


class Settings(ImageSettings, TaskSettings):
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

    # Backend connection.
    connect: str | None = Field(None, description="URL of a running SGLang server to use as the backend.")
    sglang_python: Path | None = Field(
        None, description="Python interpreter of an SGLang environment: launch and supervise SGLang."
    )
    sglang_version: str = Field(
        DEFAULT_SGLANG_VERSION,
        pattern=r"^\d+\.\d+\.\d+$",
        description="The SGLang release openjev is run on (docs/sglang-and-modal.md says what differs between them): "
        "supervised mode refuses to launch an OPENJEV_SGLANG_PYTHON whose sglang is another; modal_app.py "
        "builds its image from this release's official one.",
    )
    frontend: Frontend = Field(Frontend.rust, description="SGLang HTTP frontend in supervised mode.")
    sglang_args: str | None = Field(
        None,
        description="Supervised mode: more SGLang flags, shell-quoted, appended to its launch command "
        "(e.g. `--tp-size 2`); the flags openjev sets itself are refused.",
    )
    backend_api_key: SecretStr | None = Field(None, description="Bearer key sent to SGLang.")
    data_parallel_size: int | None = Field(
        None,
        ge=1,
        description="SGLang data-parallel ranks (`--dp-size`), each with its own prefix cache; every call of a "
        "conversation is pinned to one rank. Supervised: default 1 (needs the python frontend when over 1); "
        "--connect: default SGLang's own `dp_size` from /server_info.",
    )
    backend_vocab_size: int | None = Field(
        None,
        ge=1,
        description="Vocabulary size (config.json `vocab_size`) of SGLang's model, where openjev cannot read "
        "its config.json; token ids at or above it are never sent.",
    )
    backend_startup_timeout: float = Field(
        1800.0, gt=0, description="Seconds to wait for the backend to become ready before giving up."
    )
    sglang_shutdown_grace: float = Field(
        20.0, gt=0, description="Supervised mode: seconds SGLang gets to exit after SIGTERM before SIGKILL."
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
    max_concurrent_body_reads: int = Field(32, ge=1, description="Bodies received at once; more get 529 unread.")
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

    # Readout.
    temperature: float = Field(1.0, gt=0, description="Divides label logprobs before renormalising.")
    confidence: ConfidenceMode = Field(
        ConfidenceMode.typesafe, description="`typesafe` (official definition) or `entropy` (1 - H/log n)."
    )
    answer_cue: AnswerCue = Field(
        AnswerCue.plain,
        description="What ends the question turn, right before the label: `plain` (`Answer:` and a newline) "
        'or `json` (`{"answer": "`).',
    )
    option_shifts: int = Field(
        1,
        ge=1,
        le=255,
        description="Choice questions of at most 26 options: read in up to this many cyclic rotations, combined "
        "(1 = off); a longer list is read once.",
    )
    rotation_average: RotationAverage = Field(
        RotationAverage.probability,
        description="How a choice's rotations are combined: `probability` (their mean) or `log` (their "
        "renormalised geometric mean).",
    )
    rotation_skip_above: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Choice questions with option shifts: the rotations after the first are read only where the "
        "first readout's top probability (its content-free prior divided out, before the temperature) is at "
        "most this; 1 = always read, with the first.",
    )
    option_keys: bool = Field(False, description="Choice questions: show each option's key beside its description.")
    answer_cue_noul: AnswerCue | None = Field(
        None, description="The answer cue of noul questions; unset: OPENJEV_ANSWER_CUE."
    )
    answer_cue_choice: AnswerCue | None = Field(
        None, description="The answer cue of choice questions; unset: OPENJEV_ANSWER_CUE."
    )
    answer_cue_score: AnswerCue | None = Field(
        None, description="The answer cue of score questions; unset: OPENJEV_ANSWER_CUE."
    )
    worked_examples: WorkedExamples = Field(WorkedExamples.block, description="Worked examples as `block` or `lines`.")
    score_labels: ScoreLabels = Field(
        ScoreLabels.letters,
        description="Score questions: label the levels `letters` (A, B, ...) or `digits` (1, 2, ...; rubrics of "
        "up to 9 levels, longer ones stay lettered).",
    )
    score_temperature: float | None = Field(
        None, gt=0, description="Score questions: their readout's temperature; unset: OPENJEV_TEMPERATURE."
    )
    score_reverse: bool = Field(
        False,
        description="Score questions: also read the rubric in reverse order and combine both readouts in log "
        "space (one more backend call per score question).",
    )
    contextual_calibration: str = Field(
        "",
        description="Question types (comma-separated: noul, choice, score) whose readout is divided by a "
        "content-free readout of the same question (state `N/A`), each view by its own, cached per question "
        "text; empty: none.",
    )
    content_free_cache_bytes: int = Field(
        16 * 1024 * 1024, ge=0, description="Bytes of content-free readouts kept (calibration), by question text."
    )
    calibration_file: Path | None = Field(
        None,
        description="JSON file of temperatures per question type and option count (evals/calibrate.py); "
        "used in place of OPENJEV_TEMPERATURE where it has an entry.",
    )

    # The thinking tier (openjev.answering.thinking).
    think_model: str = Field(
        "openjev-think",
        description="Model name of the thinking tier: low-margin questions think first, then are read again.",
    )
    think_margin: float = Field(
        0.5,
        ge=0,
        description="Thinking tier: a question escalates when its top-two log-probability margin (nats, after "
        "normalisation) is below this.",
    )
    think_max_share: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Thinking tier: the most questions that may escalate, as a share of its last "
        "OPENJEV_THINK_WINDOW questions (and of each request's).",
    )
    think_window: int = Field(1000, ge=1, description="Thinking tier: questions in the escalation share's window.")
    think_budget_tokens: int | None = Field(
        None,
        ge=1,
        description="Thinking tier: most reasoning tokens generated per escalated question; default 1024 on "
        "SGLang, 64 on the embedded backend.",
    )

    tokenize_cache_bytes: int = Field(
        256 * 1024**2, ge=0, description="Bytes of tokenized text pieces kept, so a repeated text is tokenized once."
    )
    conversation_memo_bytes: int = Field(
        64 * 1024**2,
        ge=0,
        description="Bytes of prepared conversations kept, so a conversation that grows renders and tokenizes "
        "only its new messages; 0 renders every conversation in full.",
    )

    # Embedded backend.
    embedded_precision: EmbeddedPrecision = Field(
        EmbeddedPrecision.auto,
        description="Embedded backend: the model's precision, float32, bfloat16, int8 (torch) or gguf (the GGUF's "
        "own weights on llama.cpp); auto: gguf for a GGUF model wherever llama.cpp runs, else bfloat16 on CPUs "
        "with AMX or AVX512-BF16, else float32.",
    )
    llama_lib: Path | None = Field(
        None,
        description="Embedded backend: a llama.cpp b11524 built from source (its libllama file, or the directory of "
        "its libraries) used instead of the cpu extra's prebuilt one.",
    )
    prefix_cache_bytes: int = Field(
        1024**3, ge=0, description="Embedded backend: bytes of recent prefix KV caches kept for reuse."
    )
    embedded_batch_bytes: int = Field(
        512 * 1024**2,
        ge=0,
        description="Embedded backend: at most this many bytes over the prefix's KV-cache bytes questions are "
        "answered in one batched forward over their shared prefix; 0 answers questions one at a time.",
    )

    # Operations.
    profile: str | None = Field(None, description="Free-form deployment profile name, reported by /health.")
    log_level: str = Field("info", description="Log level of openjev and uvicorn.")

    @field_validator("contextual_calibration")
    @classmethod
    def _known_question_types(cls, value: str) -> str:
        types = [part.strip() for part in value.split(",") if part.strip()]
        unknown = sorted(set(types) - set(QUESTION_TYPES))
        if unknown:
            raise ValueError(f"unknown question type(s) {', '.join(unknown)}; expected {', '.join(QUESTION_TYPES)}")
        return ",".join(kind for kind in QUESTION_TYPES if kind in types)

    def answer_cue_of(self, question_type: str) -> AnswerCue:
        """The answer cue of a question type: its own setting, else OPENJEV_ANSWER_CUE."""
        return getattr(self, f"answer_cue_{question_type}") or self.answer_cue

    @field_validator("calibration_file")
    @classmethod
    def _calibration_file_is_usable(cls, value: Path | None) -> Path | None:
        # Checked here so a bad file stops `openjev serve` before the model loads, with the reason.
        if value is not None:
            from openjev.calibration import load_calibration

            load_calibration(value)
        return value

    @field_validator("sglang_args")
    @classmethod
    def _sglang_args_leave_openjev_flags_alone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            arguments = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"OPENJEV_SGLANG_ARGS is not valid shell quoting: {exc}") from exc
        # SGLang's argparse also takes unambiguous abbreviations: a prefix of one of these counts.
        flags = {arg.split("=", 1)[0] for arg in arguments if arg.startswith("--") and len(arg) > 2}
        taken = sorted(flag for flag in flags if any(own.startswith(flag) for own in SGLANG_FLAGS_SET_BY_OPENJEV))
        if taken:
            raise ValueError(
                f"OPENJEV_SGLANG_ARGS may not set {', '.join(taken)}: openjev sets it (see the README's settings)"
            )
        return value

    @model_validator(mode="after")
    def _one_body_of_each_cap_fits_in_flight(self) -> Settings:
        largest = max(self.max_body_bytes, self.max_image_body_bytes)
        if self.max_body_bytes_in_flight < largest:
            raise ValueError(
                f"OPENJEV_MAX_BODY_BYTES_IN_FLIGHT={self.max_body_bytes_in_flight} holds no body of the largest "
                f"size a route takes ({largest} bytes): set it at least that high"
            )
        return self

    @model_validator(mode="after")
    def _data_parallel_needs_the_python_frontend(self) -> Settings:
        # 0.5.19's Rust frontend runs inside each rank's scheduler and never reaches the data-parallel
        # controller that honours `routed_dp_rank`; with --dp-size 2 its second rank fails to bind the
        # same port (README, "Past one GPU").
        if self.sglang_python and (self.data_parallel_size or 1) > 1 and self.frontend is Frontend.rust:
            raise ValueError(
                "OPENJEV_DATA_PARALLEL_SIZE over 1 needs OPENJEV_FRONTEND=python: SGLang 0.5.19's Rust frontend "
                "cannot pin a request to a data-parallel rank"
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
