"""SGLang 0.5.19's verdict on a box question's `regex` (`validate.py`): xgrammar, its default grammar
backend, compiles the grammars openjev sends (relative and pixel caps) and refuses a broken one."""

from __future__ import annotations

import json
from pathlib import Path

from openjev.prompting.box_grammar import BoxGrammar
from openjev.prompting.tokenizer import ChatTokenizer
from tests.fake_sglang.rules import VOCAB_SIZE
from tests.sglang_contract import pinned, plugin


def record(regex: str, read_ids: list[int]) -> str:
    body = {
        "rid": "r", "input_ids": [1, 2, 3], "return_logprob": True, "logprob_start_len": -1,
        "token_ids_logprob": read_ids,
        "sampling_params": {"max_new_tokens": 24, "temperature": 0, "stop_token_ids": [151645], "regex": regex},
    }  # fmt: skip
    return json.dumps(
        {
            "body": body,
            "frontend": "python",
            "context_length": 32768,
            "max_total_num_tokens": 10**6,
            "vocab_size": VOCAB_SIZE,
            "expect": "ok",
            "dp_size": 1,
        }
    )


def test_the_box_grammars_compile_and_a_broken_one_is_refused(tmp_path: Path, qwen_tokenizer_dir: Path) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    relative, pixels = BoxGrammar.of(chat), BoxGrammar.of(chat, 14142)
    digits = list(relative.read_ids)
    payloads, commands = tmp_path / "payloads.jsonl", tmp_path / "commands.jsonl"
    payloads.write_text("\n".join(record(regex, digits) for regex in (relative.regex, pixels.regex, "(0|[1-9]")))
    commands.write_text("")
    result = plugin.validate(pinned.contract_python(), payloads, commands)
    # Only the broken regex is refused (the record said ok: the verdicts differ).
    (error,) = result["errors"]
    assert "SGLang 0.5.19 says refused" in error and "(0|[1-9]" in error
