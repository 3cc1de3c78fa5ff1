"""The embedded precision per CPU, and the int8 linear layer it uses where bf16 is not native."""

from __future__ import annotations

import os

import pytest

from openjev.backends.embedded.precision import (
    auto_precision,
    load_dtype,
    normalize_precision,
    physical_cores,
    resolve_precision,
    row_scaled_int8,
    storage_dtype,
)

AMX = {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
AVX512 = {"avx2", "avx512f", "avx512bw", "avx512_vnni"}
AVX2 = {"avx", "avx2", "fma"}


@pytest.mark.parametrize(
    ("flags", "capability", "expected"),
    [
        (AMX, "AVX512", "bfloat16"),
        # The same CPU with torch limited to AVX2 (ATEN_CPU_CAPABILITY=avx2): bf16 would be emulated.
        (AMX, "AVX2", "float32"),
        (AVX512, "AVX512", "float32"),
        (AVX2, "AVX2", "float32"),
        (set(), "DEFAULT", "float32"),
        ({"asimd"}, "DEFAULT", "float32"),  # an ARM CPU: no fbgemm
    ],
)
def test_auto_precision_follows_the_kernels_the_cpu_runs(flags, capability, expected) -> None:
    assert auto_precision(flags, capability) == expected


AVX2_X86 = AVX2 | {"f16c", "bmi2"}


@pytest.mark.parametrize(
    ("flags", "capability", "model", "installed", "expected"),
    [
        # A GGUF runs on llama.cpp wherever it is installed and its build runs here, whatever else the CPU has.
        (AVX2_X86, "AVX2", None, True, "gguf"),
        (AVX2_X86, "AVX2", "packaged:qwen2.5-coder-0.5b", True, "gguf"),
        (AVX512 | {"fma", "f16c", "bmi2"}, "AVX512", None, True, "gguf"),
        (AMX | {"fma", "f16c", "bmi2"}, "AVX512", None, True, "gguf"),  # native bf16 too: no conversion
        ({"asimd"}, "DEFAULT", None, True, "gguf"),
        (AVX2_X86, "AVX2", None, False, "float32"),  # llama.cpp not installed
        (AMX | {"fma", "f16c", "bmi2"}, "AVX512", None, False, "bfloat16"),
        (AVX2 | {"f16c"}, "AVX2", None, True, "float32"),  # no BMI2: the prebuilt kernels would not run
        (AVX2 | {"bmi2"}, "AVX2", None, True, "float32"),  # no F16C
        # Not a GGUF: torch's.
        (AVX2_X86, "AVX2", "/models/qwen-dir", True, "float32"),
        (AVX2_X86, "AVX2", "Qwen/Qwen2.5-0.5B-Instruct", True, "float32"),
        (AMX | {"fma", "f16c", "bmi2"}, "AVX512", "Qwen/Qwen2.5-0.5B-Instruct", True, "bfloat16"),
    ],
)
def test_auto_resolves_to_a_runtime_per_cpu_and_model(flags, capability, model, installed, expected) -> None:
    assert resolve_precision("auto", model, flags=flags, capability=capability, llama_installed=installed) == expected


def test_a_named_precision_is_kept_and_a_gguf_file_counts_as_gguf(tmp_path) -> None:
    assert resolve_precision("int8", None, flags=AVX2_X86, capability="AVX2", llama_installed=True) == "int8"
    assert resolve_precision("GGUF", "/nowhere", flags=set(), capability="DEFAULT", llama_installed=False) == "gguf"
    # torch's precisions stay selectable for the packaged GGUF on any CPU.
    for name in ("float32", "bfloat16"):
        assert resolve_precision(name, None, flags=AMX | AVX2_X86, capability="AVX512", llama_installed=True) == name
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_precision("auto", str(gguf), flags=AVX2_X86, capability="AVX2", llama_installed=True) == "gguf"
    assert (
        resolve_precision("auto", str(tmp_path / "gone.gguf"), flags=AVX2_X86, capability="AVX2", llama_installed=True)
        == "float32"
    )


def test_a_self_built_llama_cpp_is_taken_to_run_on_its_cpu(tmp_path) -> None:
    """OPENJEV_LLAMA_LIB: built for this machine, so the prebuilt kernels' flags do not decide."""
    built = tmp_path / "libllama.so"
    assert resolve_precision("auto", None, flags=AVX2, capability="AVX2", llama_lib=built) == "float32"  # not there
    built.write_bytes(b"")
    assert resolve_precision("auto", None, flags=AVX2, capability="AVX2", llama_lib=built) == "gguf"


def test_onednn_limited_below_bf16_means_no_bfloat16(monkeypatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert auto_precision(AMX, "AVX512") == "float32"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert auto_precision(AMX, "AVX512") == "bfloat16"


def test_precision_names_and_dtypes() -> None:
    assert [normalize_precision(name) for name in ("fp32", "BF16", " int8 ", "qint8")] == [
        "float32",
        "bfloat16",
        "int8",
        "int8",
    ]
    with pytest.raises(ValueError, match="unknown precision"):
        normalize_precision("int4")
    assert normalize_precision("gguf") == "gguf"
    # One float16 copy serves bf16 and int8; float32 keeps its exact copy.
    assert [storage_dtype(p) for p in ("float32", "bfloat16", "int8")] == ["float32", "float16", "float16"]
    assert load_dtype("int8") == "auto" and load_dtype("bfloat16") == "bfloat16"


def test_threads_are_physical_cores_of_the_affinity_mask() -> None:
    assert 1 <= physical_cores() <= len(os.sched_getaffinity(0))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao.quantization, the comparison
def test_row_scaled_int8_keeps_every_row_accurate_whatever_its_magnitude() -> None:
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(256, 512)
    x = torch.randn(8, 256, generator=generator)
    # One row 1,000x larger, as a transformer's outlier tokens are: a scale shared by the whole input
    # would leave the others a handful of levels.
    x[3] *= 1000
    quantized = row_scaled_int8(torch, linear)
    with torch.inference_mode():
        exact, approx = linear(x), quantized(x)
    relative = ((approx - exact).norm(dim=1) / exact.norm(dim=1)).tolist()
    assert max(relative) < 0.03, relative
    # Against the same layer with one activation scale for the whole input: the quiet rows are lost.
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    shared = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear: per_channel_dynamic_qconfig})
    with torch.inference_mode():
        coarse = shared(x)
    quiet = [row for row in range(8) if row != 3]
    coarse_relative = ((coarse - exact)[quiet].norm(dim=1) / exact[quiet].norm(dim=1)).min().item()
    assert coarse_relative > 5 * max(relative)


def test_row_scaled_int8_answers_a_row_alike_in_any_batch() -> None:
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(1)
    quantized = row_scaled_int8(torch, torch.nn.Linear(64, 32))
    x = torch.randn(6, 64, generator=generator)
    x[0] *= 50
    with torch.inference_mode():
        together = quantized(x[None])[0]
        alone = torch.cat([quantized(x[row : row + 1]) for row in range(6)])
    # Exact int32 sums on one grid: only the float rescaling may round differently.
    assert torch.allclose(together, alone, rtol=1e-5, atol=1e-5)
