"""Turning a GGUF into a model directory the embedded backend loads in seconds, once and atomically.

transformers dequantizes a GGUF on every load (20-80 s); `convert_gguf` does it once and saves config,
safetensors weights, tokenizer and chat template under the cache directory, keyed by the GGUF's sha256
and the dtype. Two of transformers' costs are cut meanwhile (`_faster_gguf_loading`): it parses the
GGUF's metadata (10 s for the 1.5B model's 151k-token vocabulary) three times, for the config, the
weights and the tokenizer, where once serves all; and gguf-py dequantizes block by block in numpy,
where transformers' own torch kernels do whole tensors at once.

Everything is written into `<target>.partial-<pid>` and renamed into place at the end, so a crash (or
a shutdown that does not wait) never leaves a half-written model behind: leftovers of dead processes
are removed the next time.

For the llama.cpp runtime (dtype `gguf`) nothing is converted: the tokenizer, chat template and model
facts of a byte-level BPE vocabulary are written from the GGUF's metadata by `gguf_tokenizer` (about a
second, no transformers). Converting weights, or another kind of vocabulary, needs the `torch` extra
(torch, transformers, and gguf, which transformers' GGUF loader imports); checking an existing
directory needs neither.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openjev.backends.embedded.gguf_metadata import read_gguf_metadata
from openjev.backends.embedded.gguf_tokenizer import gguf_reads_without_transformers, write_gguf_tokenizer
from openjev.prompting.tokenizer import chat_template_source

logger = logging.getLogger(__name__)

#: Written into every directory this module produces, so re-resolving it reports the real model.
METADATA_FILE = "openjev-model.json"
#: The weights of a directory made for the llama.cpp runtime: the GGUF itself (or a link to it).
GGUF_FILE = "model.gguf"
#: The `dtype` of such a directory: no conversion, the GGUF's own quantized weights.
GGUF_DTYPE = "gguf"
CPU_EXTRA_HINT = (
    "the embedded torch runtime (float32, bfloat16, int8, vision checkpoints) needs the `torch` extra: "
    "`uv sync --inexact --extra cpu --extra torch` in a checkout, or `pip install '.[cpu,torch]'`; the "
    "default GGUF on llama.cpp needs only the `cpu` extra; or serve SGLang with --connect or --sglang-python"
)
CHUNK_BYTES = 8 << 20
_PID_SUFFIX = re.compile(r"-(\d+)(?:\.gguf)?$")


class ModelSourceError(RuntimeError):
    """The configured model cannot be found, verified or converted; the message says what to do."""


def check_model_dir(path: Path) -> None:
    """Raise ModelSourceError unless `path` holds what both the backend and the prompt layer read."""
    missing = [
        name for name in ("config.json", "tokenizer.json", "tokenizer_config.json") if not (path / name).is_file()
    ]
    if not any(path.glob("*.safetensors")) and not (path / GGUF_FILE).is_file():
        missing.append(f"*.safetensors weights (or a {GGUF_FILE} for llama.cpp)")
    if is_vision_checkpoint(path) and not (path / "preprocessor_config.json").is_file():
        missing.append("preprocessor_config.json (a vision checkpoint's image processor)")
    if missing:
        raise ModelSourceError(f"{path} is not a usable model directory: missing {', '.join(missing)}")
    try:
        chat_template_source(path)
    except ValueError as exc:
        raise ModelSourceError(f"{path} has no chat template; openjev needs one to build prompts") from exc


def is_vision_checkpoint(path: Path) -> bool:
    """Whether the model directory holds a vision-language checkpoint (its config has a `vision_config`)."""
    config = path / "config.json"
    return config.is_file() and "vision_config" in json.loads(config.read_text())


def converted_dir(cache: Path, gguf_sha256: str, dtype: str) -> Path:
    return cache / "models" / f"{gguf_sha256}-{dtype}"


def convert_gguf(
    gguf: Path, target: Path, *, dtype: str, name: str, source: str, gguf_sha256: str, keep: Path | None = None
) -> None:
    """Convert `gguf` into a safetensors model directory at `target`, atomically; with `dtype` "gguf"
    (`GGUF_DTYPE`, the llama.cpp runtime) only config and tokenizer are written, beside the GGUF: moved
    in from `gguf` when it is a scratch file of ours, else `keep` names the file to link to. A
    byte-level BPE vocabulary is written by `gguf_tokenizer` in about a second, without transformers;
    other vocabularies go through transformers' converter.

    Everything is written into `<target>.partial-<pid>` next to the target and renamed into place at
    the end; on any failure the partial directory is removed. Partial directories left by a killed
    process are removed the next time.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target.parent, f"{target.name}.partial-*")
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    started = time.monotonic()
    what = "config and tokenizer of" if dtype == GGUF_DTYPE else f"{dtype} safetensors of"
    logger.info("writing %s %s in %s (once)", what, source, target)
    try:
        if dtype == GGUF_DTYPE:
            metadata = read_gguf_metadata(gguf)
            if gguf_reads_without_transformers(metadata):
                write_gguf_tokenizer(metadata, partial)
            else:
                _write_tokenizer(gguf, partial, config=True)
            if keep is not None:
                (partial / GGUF_FILE).symlink_to(keep.resolve())
            else:
                os.replace(gguf, partial / GGUF_FILE)
            check_model_dir(partial)
        else:
            _write_converted(gguf, partial, dtype)
        meta = {"name": name, "source": source, "gguf_sha256": gguf_sha256, "dtype": dtype}
        (partial / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            os.rename(partial, target)
        except OSError:
            # Another process finished the same conversion first; its copy is as good as ours.
            if not target.is_dir():
                raise
            shutil.rmtree(partial, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    logger.info("conversion finished in %.1f s", time.monotonic() - started)


def _write_converted(gguf: Path, out: Path, dtype: str) -> None:
    """Dequantize `gguf` with transformers and save config, safetensors weights and tokenizer in `out`."""
    try:
        import safetensors.torch
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise ModelSourceError(f"converting a GGUF: {CPU_EXTRA_HINT} ({exc})") from exc

    started = time.monotonic()

    def step(what: str) -> None:
        logger.info("converting: %s (%.1f s)", what, time.monotonic() - started)

    step("loading and dequantizing the GGUF weights")
    with _faster_gguf_loading():
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, dtype))
        step("saving safetensors")
    # save_pretrained refuses GGUF-loaded models ("quantized with gguf and is not serializable"); after
    # dequantization the weights are plain tensors, so drop the marker and save config and weights directly.
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
        model.config.save_pretrained(out)
        safetensors.torch.save_model(model, str(out / "model.safetensors"))
        # Release the dequantized weights (GBs) before the caller loads the converted copy.
        del model
        gc.collect()
        step("extracting the tokenizer and chat template")
        _write_tokenizer(gguf, out, config=False)
    check_model_dir(out)
    step("done")


def _write_tokenizer(gguf: Path, out: Path, *, config: bool) -> None:
    """The GGUF's tokenizer and chat template (and, with `config`, its transformers config) into `out`."""
    try:
        from transformers import AutoConfig, AutoTokenizer
    except ImportError as exc:
        raise ModelSourceError(f"reading a GGUF's tokenizer: {CPU_EXTRA_HINT} ({exc})") from exc
    with _faster_gguf_loading():
        if config:
            model_config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            if hasattr(model_config, "quantization_config"):
                delattr(model_config, "quantization_config")
            model_config.save_pretrained(out)
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(out)


@contextlib.contextmanager
def _faster_gguf_loading() -> Iterator[None]:
    """While converting: one parse of each GGUF file, and whole-tensor dequantization in torch.

    transformers' GGUF loader imports `gguf.GGUFReader` and `gguf.dequantize` when it runs, so
    replacing the two module attributes for the duration reaches it. A reader is read-only after
    parsing, so sharing one is safe; a ggml type the torch kernels lack goes to gguf-py's own.
    """
    import gguf
    import numpy as np
    import torch

    try:
        from transformers.integrations.gguf.dequant import GGML_BLOCK
        from transformers.integrations.gguf.dequant import dequantize as torch_dequantize
    except ImportError:  # transformers without its own kernels: only the parse is shared
        GGML_BLOCK, torch_dequantize = {}, None
    parse, numpy_dequantize, readers = gguf.GGUFReader, gguf.dequantize, {}

    def shared_reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = parse(path, *args, **kwargs)
        return readers[key]

    def dequantize(data: Any, qtype: Any) -> Any:
        if torch_dequantize is None or int(qtype) not in GGML_BLOCK:
            return numpy_dequantize(data, qtype)
        with warnings.catch_warnings():  # the memory-mapped bytes are read-only, and only read here
            warnings.simplefilter("ignore")
            flat = torch.from_numpy(np.ascontiguousarray(data).reshape(-1))
        return torch_dequantize(flat, int(qtype)).reshape(*data.shape[:-1], -1).numpy()

    gguf.GGUFReader, gguf.dequantize = shared_reader, dequantize
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.dequantize = parse, numpy_dequantize


def _remove_stale(directory: Path, pattern: str) -> None:
    """Remove leftovers matching `pattern` (names ending in `-<pid>[.gguf]`) of processes that died."""
    for leftover in directory.glob(pattern):
        match = _PID_SUFFIX.search(leftover.name)
        if match and not _pid_alive(int(match.group(1))):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        pass
    return True


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    started = time.monotonic()
    with path.open("rb") as src:
        while chunk := src.read(CHUNK_BYTES):
            digest.update(chunk)
    logger.info("sha256 of %s: %s (%.1f s)", path, digest.hexdigest(), time.monotonic() - started)
    return digest.hexdigest()


@contextlib.contextmanager
def assembly_file(cache: Path) -> Iterator[Path]:
    """A scratch GGUF path in the cache (not /tmp, which may be a small tmpfs), removed afterwards."""
    _remove_stale(cache, ".assembling-*.gguf")
    path = cache / f".assembling-{os.getpid()}.gguf"
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
