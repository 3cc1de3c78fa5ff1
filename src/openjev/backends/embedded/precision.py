"""The embedded model's precision: which one a CPU gets by default, and putting a loaded model in it.

Precisions (`OPENJEV_EMBEDDED_PRECISION`):

* `float32`: the reference; every weight and activation in float32.
* `bfloat16`: weights and activations in bf16, the output head in float32 (`float32_head`). Only fast
  where the CPU multiplies bf16 natively (AMX or AVX512-BF16, which oneDNN uses); elsewhere torch
  emulates it, at a fifth of float32's speed.
* `int8`: the decoder's linear layers with int8 weights (per output channel: w ≈ s_j · q_ij, q in
  [-127, 127], s_j = max_i |w_ij| / 127) and int8 activations quantized per call and per row
  (`row_scaled_int8`; fbgemm on x86), accumulating in int32 and rescaled to float32; norms,
  attention and the output head stay float32, the input embeddings in their stored float16. It
  reads weights a quarter the size of float32's, and on AVX2 fbgemm multiplies 1.5-2.5x faster.

* `gguf`: not torch's: the GGUF's own quantized weights (Q4_K_M for the packaged models) on llama.cpp
  (`llama_backend.py`), with 8-bit activations and key cells.

`resolve_precision` turns `auto` into gguf wherever the model is a GGUF and llama.cpp runs on this CPU
(its library is installed and, for the `cpu` extra's prebuilt one, the CPU has the instructions it was
built for), whatever else the CPU has: the GGUF loads as it is, with no conversion at first start, in a
third of float32's memory; on a 2-core AVX2 machine it prefilled about as fast as float32 and decoded
3x faster, with label probabilities 0.011 from float32's on average (docs/embedded.md). Elsewhere
(a safetensors or Hub model, or no llama.cpp) `auto_precision()` picks torch's: bfloat16 where bf16 is
native, float32 elsewhere. It asks torch which kernels it will run (`get_cpu_capability()`, which
honours `ATEN_CPU_CAPABILITY`) as well as the CPU's flags, so a run limited to AVX2 gets AVX2's default.
float32 and bfloat16 stay selectable by name for a GGUF too (converted once, below). int8 is chosen
explicitly: faster still, but 0.032 from float32 on average and an argmax agreement of 90%.

A GGUF is stored once converted in float16 for bfloat16 and int8 (half float32's bytes; 11 mantissa
bits, finer than bf16's 8 and int8's 7) and in float32 for float32, so the reference stays exact.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from openjev.backends.embedded.llama_abi import find_library
from openjev.backends.embedded.model_source import is_gguf_model

PRECISIONS = ("float32", "bfloat16", "int8", "gguf")
_ALIASES = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "qint8": "int8"}


def normalize_precision(precision: str) -> str:
    """`bf16`/`fp32`/... to the precision's name; ValueError for anything else."""
    name = precision.strip().lower()
    name = _ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)} (or auto)")
    return name


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        return set(cpuinfo.read_text().split())
    except OSError:
        return set()


def auto_precision(flags: set[str] | None = None, capability: str | None = None) -> str:
    """bfloat16 with native bf16 matmuls, else float32 (see the module doc).

    `capability` is torch's kernel level ("DEFAULT", "AVX2", "AVX512", ...); None asks torch.
    """
    flags = cpu_flags() if flags is None else flags
    if capability is None:
        try:
            import torch
        except ImportError:  # no torch extra: float32 names the runtime, whose error says what to install
            return "float32"
        capability = torch.backends.cpu.get_cpu_capability()
    if capability == "AVX512" and flags & {"amx_bf16", "avx512_bf16"} and not _onednn_below_bf16():
        return "bfloat16"
    return "float32"


def _onednn_below_bf16() -> bool:
    """`ONEDNN_MAX_CPU_ISA` set to a level without bf16 (e.g. AVX2): oneDNN would emulate bf16."""
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    return bool(limit) and limit != "ALL" and "BF16" not in limit and "AMX" not in limit


def resolve_precision(
    precision: str,
    local_model: str | None,
    *,
    flags: set[str] | None = None,
    capability: str | None = None,
    llama_lib: Path | None = None,
    llama_installed: bool | None = None,
) -> str:
    """The precision `auto` stands for with this model on this CPU (see the module doc); any other as it is.

    `llama_lib`: a self-built llama.cpp (`OPENJEV_LLAMA_LIB`), taken to run here; `llama_installed`: whether
    a library is there (None: look)."""
    if precision != "auto":
        return normalize_precision(precision)
    flags = cpu_flags() if flags is None else flags
    if llama_installed is None:
        llama_installed = find_library(llama_lib) is not None
    runs = llama_installed and (llama_lib is not None or runs_llama_build(flags))
    if runs and is_gguf_model(local_model):
        return "gguf"
    return auto_precision(flags, capability)


def runs_llama_build(flags: set[str]) -> bool:
    """Whether the CPU runs the `cpu` extra's prebuilt llama.cpp: x86-64-v3 on x86 (its CPU kernels use
    AVX2, FMA, F16C and BMI2, and no AVX-512), any 64-bit ARM CPU (baseline armv8-a; its flags include
    asimd)."""
    return {"avx2", "fma", "f16c", "bmi2"} <= flags or "asimd" in flags


def storage_dtype(precision: str) -> str:
    """The dtype a GGUF is converted to for `precision` (see the module doc)."""
    return "float32" if precision == "float32" else "float16"


def load_dtype(precision: str) -> str:
    """The dtype `from_pretrained` loads in before `apply_precision`: int8 quantizes from the checkpoint's
    own dtype ("auto"), one layer at a time, so a float32 copy of the whole model never exists."""
    return "auto" if precision == "int8" else precision


def apply_precision(torch: Any, lm: Any, precision: str) -> None:
    """Put a freshly loaded model in `precision` (in place)."""
    if precision == "bfloat16":
        float32_head(torch, lm)
    elif precision == "int8":
        quantize_int8(torch, lm)


def quantize_int8(torch: Any, lm: Any) -> None:
    """Every decoder layer's linear layers as `row_scaled_int8`, one layer at a time; the rest float32."""
    for layer in lm.get_decoder().layers:
        layer.float()
        for name, module in list(layer.named_modules()):
            if type(module) is torch.nn.Linear:
                parent, _, child = name.rpartition(".")
                setattr(layer.get_submodule(parent) if parent else layer, child, row_scaled_int8(torch, module))
    # The input embeddings stay in their stored 16 bits (a lookup reads one row per token; 0.5 GB saved
    # on the 1.5B model) and hand float32 rows to the first layer; the head gets a float32 copy of its own.
    embeddings, head = lm.get_input_embeddings(), lm.get_output_embeddings()
    for module in lm.modules():
        if module is not embeddings and module is not head:
            module._apply(lambda tensor: tensor.float() if tensor.is_floating_point() else tensor, recurse=False)
    embeddings.register_forward_hook(lambda _module, _args, output: output.float())
    float32_head(torch, lm)


def row_scaled_int8(torch: Any, linear: Any) -> Any:
    """A float32 `linear` as int8 weights (per output channel) and int8 activations scaled per row.

    fbgemm's dynamic int8 linear quantizes its input with one scale for the whole tensor; a transformer's
    rows differ in magnitude by 40x and more (a few tokens carry outlier activations), so the quiet rows
    would keep only a few levels. Dividing each row by its own max |x| first makes every row use the full
    range, and multiplying the output row back is exact, since y = W x is linear:
    y_r = s_r * (W (x_r / s_r)) + b, s_r = max_i |x_ri|. With the input's range pinned to [-1, 1] and
    int8 products summed exactly in int32, a layer's output for a row does not depend on the rows it is
    batched with (tested). End to end a reused prefix and a full prefill still differed by up to 0.7
    logp on unlikely labels of the 0.5B model; the cause is not yet found.
    """
    return _row_scaled_class(torch)(linear)


def _row_scaled_class(torch: Any) -> Any:
    global _ROW_SCALED
    if _ROW_SCALED is None:
        from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear
        from torch.ao.quantization import per_channel_dynamic_qconfig

        class RowScaled(torch.nn.Module):
            def __init__(self, linear: Any) -> None:
                super().__init__()
                bare = torch.nn.Linear(linear.in_features, linear.out_features, bias=False)
                bare.weight = linear.weight
                bare.qconfig = per_channel_dynamic_qconfig
                with warnings.catch_warnings():
                    # torch.ao.quantization is deprecated in favour of torchao, which has no faster CPU kernel.
                    warnings.simplefilter("ignore")
                    self.inner = DynamicInt8Linear.from_float(bare)
                self.bias = linear.bias
                self.pin = torch.zeros(1, linear.in_features)
                self.pin[0, :2] = torch.tensor([1.0, -1.0])

            def forward(self, x: Any) -> Any:
                rows = x.reshape(-1, x.shape[-1])
                scale = rows.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
                # One more row, (1, -1, 0, ...), pins the input's range to [-1, 1] whatever the other
                # rows hold, so every row is quantized on the same grid in any batch.
                y = self.inner(torch.cat([rows / scale, self.pin]))[:-1] * scale
                y = y.reshape(*x.shape[:-1], y.shape[-1])
                return y if self.bias is None else y + self.bias

        _ROW_SCALED = RowScaled
    return _ROW_SCALED


_ROW_SCALED: Any = None


def float32_head(torch: Any, lm: Any) -> None:
    """Compute the output head in float32 while the rest of the model stays in bf16/fp16.

    bf16 logits are rounded to steps of 0.125-0.25 at typical magnitudes, which quantizes the label
    probability ratios this service exists to report. With `logits_to_keep=1` the head is one
    matrix-vector product per call, so fp32 costs a few ms (and one fp32 copy of the head's weight).
    """
    head = lm.get_output_embeddings()
    # New Parameters rather than `head.float()`: a head tied to the input embeddings would take the
    # embeddings to fp32 with it.
    head.weight = torch.nn.Parameter(head.weight.detach().float(), requires_grad=False)
    if getattr(head, "bias", None) is not None:
        head.bias = torch.nn.Parameter(head.bias.detach().float(), requires_grad=False)
    head.register_forward_pre_hook(lambda _module, args: (args[0].float(), *args[1:]))


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (its affinity mask): a second hardware
    thread of a core shares its vector units, and matmul threads on both slow each other down."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not allowed:  # macOS, Windows: no topology to read
        return os.cpu_count() or 1
    cores = set()
    for cpu in allowed:
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(siblings.read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return len(cores)
