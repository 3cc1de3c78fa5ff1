"""The GGUF metadata reader and the tokenizer written from it, without transformers.

The GGUFs here are written by gguf-py's `GGUFWriter` (an independent implementation of the format):
one with every value type, and one carrying the Qwen3 tokenizer the tests use (151,669 tokens, its
merges, control and user-defined added tokens, the qwen2 split, a chat template), which transformers'
own GGUF converter must read into the same tokenizer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tokenizers import Tokenizer, pre_tokenizers

from openjev.backends.embedded import conversion
from openjev.backends.embedded.gguf_metadata import GGUFFormatError, read_gguf_metadata
from openjev.backends.embedded.gguf_tokenizer import (
    byte_level_alphabet,
    byte_level_tokenizer,
    gguf_reads_without_transformers,
)

gguf = pytest.importorskip("gguf")

TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
CORPUS = [
    "Hello world! It's 2026-12-03 and we've paid   twice.\n\n\tTabs, ünïcödé, 日本語のテキスト, emoji 🙂🚀.",
    "<|im_start|>user\nIs <think>this</think> a <tool_call>? <|im_end|>\n<|endoftext|>",
    "   leading spaces, trailing spaces   \r\n\r\nnumbers 1234567 and 3.14159, code: def f(x): return x**2",
    "".join(chr(c) for c in range(32, 600)),
]


def qwen_gguf(tokenizer_dir: Path, path: Path) -> Path:
    """A GGUF holding only the metadata of the Qwen3 test tokenizer, as llama.cpp's converter writes it."""
    spec = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    added = {token["id"]: token for token in spec["added_tokens"]}
    by_id = {index: token for token, index in spec["model"]["vocab"].items()}
    by_id.update({index: token["content"] for index, token in added.items()})
    tokens = [by_id[index] for index in range(len(by_id))]
    types = [
        (gguf.TokenType.CONTROL if added[index]["special"] else gguf.TokenType.USER_DEFINED)
        if index in added
        else gguf.TokenType.NORMAL
        for index in range(len(tokens))
    ]
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in spec["model"]["merges"]]
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(4096)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(spec["model"]["vocab"].get("<|endoftext|>", 151643))
    writer.add_eos_token_id(next(index for index, token in added.items() if token["content"] == "<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(TEMPLATE)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def qwen_gguf_file(qwen_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return qwen_gguf(qwen_tokenizer_dir, tmp_path_factory.mktemp("gguf") / "qwen.gguf")


def test_every_value_type_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "values.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")
    values = {
        "t.u8": (7, gguf.GGUFValueType.UINT8), "t.i8": (-7, gguf.GGUFValueType.INT8),
        "t.u16": (65535, gguf.GGUFValueType.UINT16), "t.i16": (-300, gguf.GGUFValueType.INT16),
        "t.u32": (4_000_000_000, gguf.GGUFValueType.UINT32), "t.i32": (-5, gguf.GGUFValueType.INT32),
        "t.f32": (0.5, gguf.GGUFValueType.FLOAT32), "t.bool": (True, gguf.GGUFValueType.BOOL),
        "t.u64": (2**40, gguf.GGUFValueType.UINT64), "t.i64": (-(2**40), gguf.GGUFValueType.INT64),
        "t.f64": (1e-300, gguf.GGUFValueType.FLOAT64), "t.str": ("ünï 日本", gguf.GGUFValueType.STRING),
    }  # fmt: skip
    for key, (value, kind) in values.items():
        writer.add_key_value(key, value, kind)
    writer.add_array("t.ints", [1, -2, 3])
    writer.add_array("t.strings", ["a b", "", "Ġ"])
    writer.add_tensor("w", __import__("numpy").zeros((2, 3), dtype="float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    metadata = read_gguf_metadata(path)
    assert metadata["general.architecture"] == "qwen2"
    assert {key: metadata[key] for key in values} == {key: value for key, (value, _) in values.items()}
    assert metadata["t.ints"] == [1, -2, 3] and metadata["t.strings"] == ["a b", "", "Ġ"]


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").write_bytes(b"PK\x03\x04" + bytes(40))
    (tmp_path / "v1.gguf").write_bytes(b"GGUF" + (1).to_bytes(4, "little") + bytes(16))
    with pytest.raises(GGUFFormatError, match="magic"):
        read_gguf_metadata(tmp_path / "a.gguf")
    with pytest.raises(GGUFFormatError, match="version 1"):
        read_gguf_metadata(tmp_path / "v1.gguf")


def test_the_byte_alphabet_is_the_byte_level_pre_tokenizers() -> None:
    alphabet = byte_level_alphabet()
    assert sorted(alphabet) == list(range(256))
    assert set(alphabet.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ" and alphabet[ord("A")] == "A"


def test_the_tokenizer_is_the_one_transformers_builds_from_the_same_file(qwen_gguf_file: Path) -> None:
    from transformers import AutoTokenizer

    metadata = read_gguf_metadata(qwen_gguf_file)
    assert gguf_reads_without_transformers(metadata)
    ours = byte_level_tokenizer(metadata)
    theirs = AutoTokenizer.from_pretrained(str(qwen_gguf_file.parent), gguf_file=qwen_gguf_file.name)
    reference = json.loads(theirs.backend_tokenizer.to_str())
    built = json.loads(ours.to_str())
    assert built["model"] == reference["model"]
    assert built["added_tokens"] == reference["added_tokens"]
    assert (built["pre_tokenizer"], built["decoder"]) == (reference["pre_tokenizer"], reference["decoder"])
    for text in CORPUS:
        ids = ours.encode(text, add_special_tokens=False).ids
        assert ids == theirs.backend_tokenizer.encode(text, add_special_tokens=False).ids
        assert ours.decode(ids, skip_special_tokens=False) == text


def test_a_vocabulary_of_another_kind_is_left_to_transformers(qwen_gguf_file: Path) -> None:
    metadata = read_gguf_metadata(qwen_gguf_file)
    assert not gguf_reads_without_transformers({**metadata, "tokenizer.ggml.model": "llama"})
    assert not gguf_reads_without_transformers({**metadata, "tokenizer.ggml.pre": "an-unknown-split"})
    assert not gguf_reads_without_transformers({**metadata, "tokenizer.ggml.merges": []})


def test_a_gguf_directory_is_made_without_torch_or_transformers(qwen_gguf_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "model"
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules.update({{"torch": None, "transformers": None}})
        from pathlib import Path
        from openjev.backends.embedded.conversion import convert_gguf
        from openjev.prompting.tokenizer import ChatTokenizer
        gguf = Path({str(qwen_gguf_file)!r})
        convert_gguf(gguf, Path({str(target)!r}), dtype="gguf", name="q", source="q.gguf", gguf_sha256="x", keep=gguf)
        chat = ChatTokenizer({str(target)!r}, cache_dir=Path({str(tmp_path)!r}))
        print(chat.render([{{"role": "user", "content": "hi"}}]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "<|im_start|>user\nhi<|im_end|>\n\n"
    conversion.check_model_dir(target)
    assert (target / conversion.GGUF_FILE).resolve() == qwen_gguf_file.resolve()
    saved = Tokenizer.from_file(str(target / "tokenizer.json"))
    assert (
        saved.encode(CORPUS[1], add_special_tokens=False).ids
        == byte_level_tokenizer(read_gguf_metadata(qwen_gguf_file)).encode(CORPUS[1], add_special_tokens=False).ids
    )
    config = json.loads((target / "config.json").read_text())
    assert (config["model_type"], config["vocab_size"], config["max_position_embeddings"]) == ("qwen2", 151669, 4096)
    assert json.loads((target / "tokenizer_config.json").read_text())["eos_token"] == "<|im_end|>"
