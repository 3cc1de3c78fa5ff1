"""A real SGLang on this CPU, for the live tests: its environment, a model directory it loads,
and the flags that put it on the CPU engine.

- The interpreter is a test-only environment of `tests/sglang_contract`: `.cache/sglang-0.5.19` (the
  production pin; `sglang_python`), and for the test that runs on every pinned release also
  `.cache/sglang-0.5.23` (`sglang_release`), each built by `tests/sglang_contract/build-env [VERSION]`
  the first time a session needs it (`OPENJEV_SGLANG_CONTRACT_PYTHON` overrides 0.5.19's). A `.pth`
  file written into it makes every SGLang process import `site/openjev_sglang_cpu.py`: stand-ins for
  torchvision (PyPI's wheel needs CUDA libraries) and for the one `sgl_kernel` CPU op a dense model uses, and the four
  `torch.ops.sgl_kernel` CPU ops that the Qwen-VL processor's import binds (raising if called) so
  that SGLang serves a Qwen-VL model (`test_live_vision.py`).
- The model is the project's packaged test model (Qwen2.5-Coder-0.5B, float32), exposed as a Hugging
  Face directory: the converted weights and tokenizer, and a config naming its architecture.
- Where the environment cannot be built these tests fail, naming the command that builds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sglang_contract.pinned import VERSIONS, PinnedEnvironmentError, contract_python
from tests.sglang_live.environment import CPU_ENVIRONMENT, CPU_FLAGS, install_cpu_stand_ins, packaged_model_directory


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    try:
        python = contract_python()
    except PinnedEnvironmentError as error:
        pytest.fail(str(error))
    install_cpu_stand_ins(python)
    return python


@pytest.fixture(scope="session", params=VERSIONS)
def sglang_release(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """Each pinned release and its interpreter (`.cache/sglang-<version>`, built where missing)."""
    try:
        python = contract_python(request.param)
    except PinnedEnvironmentError as error:
        pytest.fail(str(error))
    install_cpu_stand_ins(python)
    return request.param, python


@pytest.fixture(scope="session")
def sglang_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    return packaged_model_directory(tmp_path_factory.mktemp("sglang-model"))


@pytest.fixture(scope="session")
def cpu_environment() -> Iterator[dict[str, str]]:
    yield {**CPU_ENVIRONMENT, "OPENJEV_SGLANG_ARGS": CPU_FLAGS}
