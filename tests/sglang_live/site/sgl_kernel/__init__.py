"""Test-only stand-in for the `sgl_kernel` CPU ops SGLang 0.5.19 imports at module load on its CPU engine.

Only `assign_req_to_token_pool_cpu` runs when serving a plain dense model (every extend,
`mem_cache/allocation.py`); the others belong to speculative decoding and raise if called. Without
`torch.ops.sgl_kernel.convert_weight_packed` SGLang keeps every layer on its pure-torch path.

Four ops are registered under `torch.ops.sgl_kernel` as well: `srt/models/qwen3_5.py` binds them at
module load on the CPU (lines 221-235), and the Qwen-VL image processor (`multimodal/processors/
qwen_vl.py`) imports that module, so without them SGLang registers no processor for any Qwen-VL
model. Serving Qwen2.5-VL or Qwen3-VL never calls them; each raises if it is.
"""

import torch


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    stride: int,
) -> None:
    """Row `req_pool_indices[i]`, slots `[start_offset[i], end_offset[i])`, takes the next entries of
    `out_cache_loc`, request after request."""
    position = 0
    for index in range(req_pool_indices.numel()):
        start, end = int(start_offset[index]), int(end_offset[index])
        req_to_token[int(req_pool_indices[index]), start:end] = out_cache_loc[position : position + end - start]
        position += end - start


def _unavailable(name: str):
    def op(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(f"sgl_kernel stand-in: {name} is not available")

    return op


for _name in (
    "assign_extend_cache_locs_cpu",
    "assign_draft_cache_locs_contiguous_cpu",
    "build_tree_kernel_efficient_cpu",
    "verify_tree_greedy_cpu",
    "copy_all_layer_kv_cache_cpu",
    "rotate_input_ids_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
):
    globals()[_name] = _unavailable(_name)


#: Schemas fitting the arguments `qwen3_5.py` passes; only the names matter, since none is ever called.
_QWEN3_5_CPU_OPS = (
    "fused_sigmoid_mul_cpu(Tensor(a!) input, Tensor gate) -> ()",
    "fused_qk_gemma_rmsnorm_cpu(Tensor q, Tensor k, Tensor q_weight, Tensor k_weight, float eps, int head_dim)"
    " -> (Tensor, Tensor)",
    "fused_qk_gemma_rmsnorm_with_gate_cpu(Tensor q_gate, Tensor k, Tensor q_weight, Tensor k_weight, float eps,"
    " int head_dim, int num_head) -> (Tensor, Tensor, Tensor)",
    "fused_qkvzba_split_reshape_cat_contiguous_cpu(Tensor mixed_qkvz, Tensor mixed_ba, int num_heads_qk,"
    " int num_heads_v, int head_qk, int head_v) -> (Tensor, Tensor, Tensor, Tensor)",
)
# Kept referenced: a Library's registrations are dropped when it is garbage collected.
_LIBRARY = torch.library.Library("sgl_kernel", "FRAGMENT")
for _schema in _QWEN3_5_CPU_OPS:
    _op_name = _schema.split("(", 1)[0]
    _LIBRARY.define(_schema)
    _LIBRARY.impl(_op_name, _unavailable(f"torch.ops.sgl_kernel.{_op_name}"), "CompositeExplicitAutograd")
