"""The test-only SGLang 0.5.19 environment made ready for its CPU engine (see conftest.py)."""

from __future__ import annotations

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
