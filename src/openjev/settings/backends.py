"""The backends' settings: the connection to SGLang (or its supervision) and the embedded model, a part of
`config.Settings`, which inherits them; read, documented and mirrored by CLI flags as every other
`OPENJEV_*` setting.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

from openjev.options import SGLANG_FLAGS_SET_BY_OPENJEV, EmbeddedPrecision, Frontend

#: The SGLang release openjev is verified on in production (a GPU); 0.5.23 runs the CPU test suites too.
DEFAULT_SGLANG_VERSION = "0.5.19"


class BackendSettings(BaseSettings):
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
    def _data_parallel_needs_the_python_frontend(self) -> Self:
        # 0.5.19's Rust frontend runs inside each rank's scheduler and never reaches the data-parallel
        # controller that honours `routed_dp_rank`; with --dp-size 2 its second rank fails to bind the
        # same port (README, "Past one GPU").
        if self.sglang_python and (self.data_parallel_size or 1) > 1 and self.frontend is Frontend.rust:
            raise ValueError(
                "OPENJEV_DATA_PARALLEL_SIZE over 1 needs OPENJEV_FRONTEND=python: SGLang 0.5.19's Rust frontend "
                "cannot pin a request to a data-parallel rank"
            )
        return self
