"""The test-only SGLang 0.5.19 environment made ready for its CPU engine (see conftest.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"
PTH_NAME = "openjev-sglang-cpu.pth"
#: SGLang's CPU engine with pure-torch attention; float32 as the embedded backend runs the same model.
#: Prefill in chunks of 128 tokens, so an abort takes effect within one chunk.
CPU_FLAGS = (
    "--device cpu --attention-backend torch_native --dtype float32 --max-total-tokens 8192 --chunked-prefill-size 128"
)
CPU_ENVIRONMENT = {"SGLANG_USE_CPU_ENGINE": "1"}


def cpu_ranks_binding(ranks: int) -> dict[str, str]:
    """The CPU engine binds each rank to a NUMA node and refuses more ranks than nodes unless
    SGLANG_CPU_OMP_THREADS_BIND names each rank's cores (`srt/utils/numa_utils.py` `init_threads_binding`):
    this machine's cores, split into `ranks` groups."""
    cores = sorted(os.sched_getaffinity(0))
    size = max(1, len(cores) // ranks)
    groups = [cores[rank * size : (rank + 1) * size] or cores[-1:] for rank in range(ranks)]
    return {"SGLANG_CPU_OMP_THREADS_BIND": "|".join(",".join(map(str, group)) for group in groups)}


def install_cpu_stand_ins(python: Path) -> None:
    """Write the `.pth` file that makes every process of `python` import `site/openjev_sglang_cpu.py`."""
    environment = python.parent.parent
    version = next((environment / "lib").glob("python3.*"))
    pth = environment / "lib" / version.name / "site-packages" / PTH_NAME
    wanted = f"{SITE}\nimport openjev_sglang_cpu\n"
    if not pth.is_file() or pth.read_text() != wanted:
        pth.write_text(wanted)


def packaged_model_directory(directory: Path) -> Path:
    """The packaged test model (Qwen2.5-Coder-0.5B, float32) as a Hugging Face directory SGLang loads:
    its converted weights and tokenizer, and a config naming its architecture; `directory` is returned."""
    from openjev.backends.embedded.model_source import resolve_model
    from tests.backends.embedded.conftest import TEST_MODEL

    source = resolve_model(TEST_MODEL).path
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (directory / name).symlink_to(source / name)
    config = json.loads((source / "config.json").read_text())
    config.update(architectures=["Qwen2ForCausalLM"], torch_dtype="float32")
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    return directory
