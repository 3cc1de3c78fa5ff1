"""The test-only SGLang 0.5.19 environment made ready for its CPU engine (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"
PTH_NAME = "openjev-sglang-cpu.pth"
#: SGLang's CPU engine with pure-torch attention; float32 as the embedded backend runs the same model.
#: Prefill in chunks of 128 tokens, so an abort takes effect within one chunk.
CPU_FLAGS = (
    "--device cpu --attention-backend torch_native --dtype float32 --max-total-tokens 8192 --chunked-prefill-size 128"
)
CPU_ENVIRONMENT = {"SGLANG_USE_CPU_ENGINE": "1"}


def install_cpu_stand_ins(python: Path) -> None:
    """Write the `.pth` file that makes every process of `python` import `site/openjev_sglang_cpu.py`."""
    environment = python.parent.parent
    version = next((environment / "lib").glob("python3.*"))
    pth = environment / "lib" / version.name / "site-packages" / PTH_NAME
    wanted = f"{SITE}\nimport openjev_sglang_cpu\n"
    if not pth.is_file() or pth.read_text() != wanted:
        pth.write_text(wanted)
