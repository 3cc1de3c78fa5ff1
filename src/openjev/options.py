"""The closed sets of values that settings take, and the SGLang flags openjev keeps for itself.

`openjev.config` reads the settings with these types and re-exports them, so a stage imports them from
either; they live apart so that the settings class reads as the list of settings.
"""

from __future__ import annotations

from enum import StrEnum


class EmbeddedPrecision(StrEnum):
    """The embedded model's precision (`backends/embedded/precision.py`)."""

    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    int8 = "int8"
    gguf = "gguf"


class ConfidenceMode(StrEnum):
    typesafe = "typesafe"
    entropy = "entropy"


class AnswerCue(StrEnum):
    plain = "plain"
    json = "json"


class RotationAverage(StrEnum):
    """How a choice's rotations are combined (`debias.combine_views`): mean probability or mean log-probability."""

    probability = "probability"
    log = "log"


class OptionOrder(StrEnum):
    """The order a choice's options are shown in (`prompting/option_order.py`): as sent, or sorted by text."""

    given = "given"
    canonical = "canonical"


class WorkedExamples(StrEnum):
    """How a criteria entry's worked examples are shown (`prompting/worked_examples.py`)."""

    block = "block"
    lines = "lines"


class ScoreLabels(StrEnum):
    letters = "letters"
    digits = "digits"


#: The question types a per-type readout setting names.
QUESTION_TYPES = ("noul", "choice", "score")


class ImageTransfer(StrEnum):
    """How a prepared image reaches SGLang (`backends/sglang_images.py`)."""

    auto = "auto"
    file = "file"
    base64 = "base64"


class Frontend(StrEnum):
    rust = "rust"
    python = "python"


#: SGLang flags that carry openjev's own settings or its contract with SGLang (model, tokenizer, name,
#: the private address, the prompt limit, the warm-up race, the key): OPENJEV_SGLANG_ARGS may not set them.
SGLANG_FLAGS_SET_BY_OPENJEV = frozenset(
    {
        "--model-path",
        "--model",
        "--revision",
        "--tokenizer-path",
        "--served-model-name",
        "--host",
        "--port",
        "--context-length",
        "--skip-server-warmup",
        "--api-key",
        "--dp-size",
        "--data-parallel-size",
        # Readouts that ask for the hidden state need it (`backends/sglang_hidden.py`).
        "--return-hidden-states-mode",
        "--enable-return-hidden-states",
    }
)
