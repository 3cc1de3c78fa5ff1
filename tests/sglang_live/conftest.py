"""A real SGLang 0.5.19 on this CPU, for the live tests: its environment, a model directory it loads,
and the flags that put it on the CPU engine.

- The interpreter is the test-only environment of `tests/sglang_contract` (`.cache/sglang-0.5.19`,
  built by `tests/sglang_contract/build-env` the first time a session needs it;
  `OPENJEV_SGLANG_CONTRACT_PYTHON` overrides). A `.pth` file written into it makes
  every SGLang process import `site/openjev_sglang_cpu.py`: stand-ins for torchvision (PyPI's wheel
  needs CUDA libraries) and for the one `sgl_kernel` CPU op a dense model uses, and the four
  `torch.ops.sgl_kernel` CPU ops that the Qwen-VL processor's import binds (raising if called) so
  that SGLang serves a Qwen-VL model (`test_live_vision.py`).
- The model is the project's packaged test model (Qwen2.5-Coder-0.5B, float32), exposed as a Hugging
  Face directory: the converted weights and tokenizer, and a config naming its architecture.
- Where the environment cannot be built these tests fail, naming the command that builds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.embedded.conftest import TEST_MODEL
from tests.sglang_contract.pinned import PinnedEnvironmentError, contract_python
from tests.sglang_live.environment import CPU_ENVIRONMENT, CPU_FLAGS, install_cpu_stand_ins


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    try:
        python = contract_python()
    except PinnedEnvironmentError as error:
        pytest.fail(str(error))
    install_cpu_stand_ins(python)
    return python


@pytest.fixture(scope="session")
def sglang_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from openjev.backends.embedded.model_source import resolve_model

    source = resolve_model(TEST_MODEL).path
    directory = tmp_path_factory.mktemp("sglang-model")
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (directory / name).symlink_to(source / name)
    config = json.loads((source / "config.json").read_text())
    config.update(architectures=["Qwen2ForCausalLM"], torch_dtype="float32")
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    return directory


@pytest.fixture(scope="session")
def cpu_environment() -> Iterator[dict[str, str]]:
    yield {**CPU_ENVIRONMENT, "OPENJEV_SGLANG_ARGS": CPU_FLAGS}
