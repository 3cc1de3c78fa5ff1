"""A real SGLang 0.5.19 on this CPU, for the live tests: its environment, a model directory it loads,
and the flags that put it on the CPU engine.

- The interpreter is the test-only environment of `tests/sglang_contract` (`.cache/sglang-0.5.19`,
  built by `.ci/run`; `OPENJEV_SGLANG_CONTRACT_PYTHON` overrides). A `.pth` file written into it makes
  every SGLang process import `site/openjev_sglang_cpu.py`: stand-ins for torchvision (PyPI's wheel
  needs CUDA libraries) and for the one `sgl_kernel` CPU op a dense model uses.
- The model is the project's packaged test model (Qwen2.5-Coder-0.5B, float32), exposed as a Hugging
  Face directory: the converted weights and tokenizer, and a config naming its architecture.
- Without the interpreter these tests skip, except with OPENJEV_REQUIRE_SGLANG_LIVE set (`.ci/run`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.embedded.conftest import TEST_MODEL
from tests.sglang_contract.plugin import contract_python

SITE = Path(__file__).resolve().parent / "site"
PTH_NAME = "openjev-sglang-cpu.pth"
#: SGLang's CPU engine with pure-torch attention; float32 as the embedded backend runs the same model.
#: Prefill in chunks of 128 tokens, so an abort takes effect within one chunk.
CPU_FLAGS = (
    "--device cpu --attention-backend torch_native --dtype float32 --max-total-tokens 8192 --chunked-prefill-size 128"
)
CPU_ENVIRONMENT = {"SGLANG_USE_CPU_ENGINE": "1"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("sglang_live") is None and "sglang_live" in str(item.path):
            item.add_marker(pytest.mark.sglang_live)


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    python = contract_python()
    if python is None:
        pytest.skip("no SGLang 0.5.19 environment (.cache/sglang-0.5.19; .ci/run builds it)")
    purelib = _site_packages(python)
    pth = purelib / PTH_NAME
    wanted = f"{SITE}\nimport openjev_sglang_cpu\n"
    if not pth.is_file() or pth.read_text() != wanted:
        pth.write_text(wanted)
    return python


def _site_packages(python: Path) -> Path:
    environment = python.parent.parent
    version = next((environment / "lib").glob("python3.*"))
    return environment / "lib" / version.name / "site-packages"


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
