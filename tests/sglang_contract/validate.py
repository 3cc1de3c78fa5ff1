"""Run by SGLang 0.5.19's interpreter (never by openjev's): check recorded `/generate` bodies and
launch commands with SGLang's own classes, print one JSON report on stdout.

    python validate.py PAYLOADS.jsonl COMMANDS.jsonl

Each payload line is `{"body", "frontend", "context_length", "max_total_num_tokens", "vocab_size",
"expect"}` (and `return_hidden_states_mode` where the fake was launched with one, checked with the server
args of that launch) where `expect` is the fake SGLang's verdict (`ok`, `refused` or `crash`); SGLang's verdict
must be the same, so this also checks the fake. SGLang's verdict, in its own request path:
- `GenerateReqInput` parsed as FastAPI does (pydantic), `normalize_batch_and_arguments()`
  (a body in the list form is a batch: each of its requests, `request[i]`, checked as follows,
  every one before any reaches the scheduler, as `_handle_batch_request` does)
  (`managers/io_struct.py:378`), the TokenizerManager's `generate_request` up to its `routed_dp_rank`
  check against the record's `dp_size` (`tokenizer_manager.py:790-799`), its `_validate_one_request`
  (`managers/tokenizer_manager.py:1162`: lengths, `token_ids_logprob` ids), `SamplingParams(**params)`
  with `normalize` and `verify` (`tokenizer_manager.py:1361-1363`), and a `regex` compiled by
  xgrammar (0.5.19's default grammar backend, `constrained/xgrammar_backend.py`): an error in any is
  `refused`;
- `image_data`: one entry per image pad of the ids (the record's `image_pad_id`), each loaded by 0.5.19's
  own `utils/common.py` `load_image` (CPU decoding) into a PNG or a JPEG: a miscount, an entry it
  cannot load, another format or a JPEG that ends with its end marker (`is_jpeg_with_cuda`: decoded
  on a GPU, then the decode-and-retokenize path) is `refused`;
- then the scheduler's `validate_input_length` (`managers/utils.py:207-219`, the check
  `managers/scheduler.py:2835` makes too) with `max_req_input_len`, and the embedding lookup of
  `input_ids`: a failure is `crash` on the Python frontend, `refused` on the Rust one.
Two rules are copied, not called (tests/sglang_contract/test_pins.py pins each cited line):
- `max_req_input_len` = `min(context_len - 1, max_total_num_tokens - 1) - 5`: `get_worker_info`
  (`managers/tp_worker.py:543-556`; `attn_dcp_size` is 1 without decode context parallelism) returns
  `max_req_len` and `max_req_len - 5`, which the scheduler unpacks as `max_req_len, max_req_input_len`
  (`managers/scheduler.py:1084-1097`);
- `input_ids` are never checked against the vocabulary: `_validate_input_ids_in_vocab`
  (`managers/tokenizer_manager.py:1318`) is defined and never called; only `token_ids_logprob` ids are
  (`managers/tokenizer_manager.py:1312`), so an id outside the embedding reaches the lookup.
Each command line is an argv after `-m sglang.launch_server`, parsed by `ServerArgs`'s own parser.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap

bootstrap.prepare()

import pydantic  # noqa: E402
import xgrammar  # noqa: E402
from sglang.srt.managers.io_struct import GenerateReqInput  # noqa: E402
from sglang.srt.managers.tokenizer_manager import TokenizerManager  # noqa: E402
from sglang.srt.managers.utils import validate_input_length  # noqa: E402
from sglang.srt.runtime_context import get_context  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.srt.utils.common import get_image_bytes, load_image  # noqa: E402

SCHEDULER_RESERVED = 5  # managers/tp_worker.py:556 `max_req_len - 5`


def tokenizer_manager(context_length: int, vocab_size: int) -> types.SimpleNamespace:
    """The few attributes `_validate_one_request` reads, as a started TokenizerManager has them."""
    tm = types.SimpleNamespace(
        context_len=context_length, num_reserved_tokens=0, validate_total_tokens=True, allow_auto_truncate=False,
        model_config=types.SimpleNamespace(vocab_size=vocab_size),
    )  # fmt: skip
    tm._validate_token_ids_logprob = lambda obj: TokenizerManager._validate_token_ids_logprob(tm, obj)
    return tm


class _RankChecked(Exception):
    """Raised where `generate_request` goes on past its rank check (to tokenize and schedule)."""


def check_rank(request: GenerateReqInput, dp_size: int) -> None:
    """TokenizerManager.generate_request's own code, with `dp_size` ranks, up to its rank check: it
    normalizes the request (`normalize_batch_and_arguments`) first."""

    def stop(*_: object) -> None:
        raise _RankChecked

    tm = types.SimpleNamespace(
        auto_create_handle_loop=lambda: None, _set_default_priority=lambda obj: None,
        elastic_worker_count=dp_size, _init_req_state=stop,
    )  # fmt: skip
    try:
        asyncio.run(TokenizerManager.generate_request(tm, request, None).__anext__())
    except _RankChecked:
        return


def image_refusal(request: GenerateReqInput, pad_id: int | None) -> str:
    """Why 0.5.19 would not take the request's images as openjev means them; empty when it would."""
    images = request.image_data
    if images is None:  # a batch's request without images has `[]`, which the pad count below checks
        return ""
    images = images if isinstance(images, list) else [images]
    if pad_id is None or request.input_ids.count(pad_id) != len(images):
        return f"{len(images)} images for {request.input_ids.count(pad_id)} image pads"
    for entry in images:
        try:
            image, _ = load_image(entry, gpu_image_decode=False)
        except (ValueError, OSError) as error:
            return f"load_image: {error}"
        kind = getattr(image, "format", None)
        if kind not in ("PNG", "JPEG"):
            return f"an image loads as {kind or type(image).__name__}, not PNG or JPEG"
        # `is_jpeg_with_cuda`: with a GPU, a JPEG that ends with its end marker is decoded there, into a
        # tensor the Qwen-VL processor cannot size, and the prompt is tokenized again.
        if kind == "JPEG" and get_image_bytes(entry).endswith(b"\xff\xd9"):
            return "a JPEG that ends with its end marker is decoded on a GPU and its prompt tokenized again"
    return ""


def refusal(request: GenerateReqInput, context: int, vocab: int, pad_id: int | None) -> str:
    """Why the TokenizerManager refuses one normalized request (one of a batch); empty when it admits it."""
    try:
        TokenizerManager._validate_one_request(tokenizer_manager(context, vocab), request, request.input_ids)
        params = SamplingParams(**(request.sampling_params or {}))
        params.normalize(None)
        params.verify(vocab)
        if params.regex is not None:  # what 0.5.19's default grammar backend compiles (a box's grammar)
            xgrammar.Grammar.from_regex(params.regex)
    except (ValueError, TypeError, RuntimeError) as error:
        return f"{type(error).__name__}: {str(error)[:200]}"
    return image_refusal(request, pad_id)


def scheduler_failure(request: GenerateReqInput, context: int, kv: int, vocab: int) -> str:
    """Why the scheduler or the model fails on one admitted request; empty when it runs."""
    limit = min(context - 1, kv - 1) - SCHEDULER_RESERVED
    scheduler = validate_input_length(types.SimpleNamespace(origin_input_ids=request.input_ids), limit, False)
    oov = [token for token in request.input_ids if not 0 <= token < vocab]
    return scheduler or (f"input id {oov[0]} is outside the embedding ({vocab} rows)" if oov else "")


def verdict(record: dict) -> tuple[str, str]:
    """A single request, or a batch (the list form: every request checked before any is scheduled)."""
    body, vocab = record["body"], record["vocab_size"]
    context, kv = record["context_length"], record["max_total_num_tokens"]
    try:
        request = pydantic.TypeAdapter(GenerateReqInput).validate_python(body)
        # Normalizes it first, once (a second `normalize_batch_and_arguments` would wrap a batch's images again).
        check_rank(request, record.get("dp_size", 1))
    except (pydantic.ValidationError, ValueError, TypeError, RuntimeError) as error:
        return "refused", f"{type(error).__name__}: {str(error)[:200]}"
    requests = [request] if request.is_single else [request[index] for index in range(request.batch_size)]
    for one in requests:
        refused = refusal(one, context, vocab, record.get("image_pad_id"))
        if refused:
            return "refused", refused
    for one in requests:
        failure = scheduler_failure(one, context, kv, vocab)
        if failure:
            return ("refused" if record["frontend"] == "rust" else "crash"), failure
    return "ok", ""


def check_commands(lines: list[str]) -> list[str]:
    errors = []
    for line in lines:
        argv = json.loads(line)
        parser = argparse.ArgumentParser(exit_on_error=False)
        ServerArgs.add_cli_args(parser)
        try:
            ServerArgs.from_cli_args(parser.parse_args(argv))
        except (SystemExit, argparse.ArgumentError, ValueError, TypeError) as error:
            errors.append(f"launch flags {argv} do not parse in SGLang 0.5.19: {error!r}")
    return errors


def main() -> None:
    payloads, commands = (Path(name).read_text().splitlines() for name in sys.argv[1:3])
    # Raw defaults (no model, no device probe), and those of a server launched with hidden states.
    launched = {mode: ServerArgs(model_path="unused", return_hidden_states_mode=mode) for mode in (None, "last")}
    errors = []
    for line in payloads:
        record = json.loads(line)
        get_context().set_server_args(launched[record.get("return_hidden_states_mode")])
        found, reason = verdict(record)
        if found != record["expect"]:
            body = {**record["body"], "input_ids": f"<{len(record['body'].get('input_ids') or [])} ids or requests>"}
            body.pop("image_data", None)
            errors.append(f"SGLang 0.5.19 says {found} ({reason}), the fake said {record['expect']}: {body}")
    errors += check_commands(commands)
    print(json.dumps({"payloads": len(payloads), "commands": len(commands), "errors": errors}))


if __name__ == "__main__":
    main()
