"""The rules `validate.py` copies from SGLang 0.5.19 rather than calls (the scheduler's length limit,
and input ids never checked against the vocabulary), pinned against 0.5.19's own source in the pinned
environment: each cited line must still say what the copy assumes, and `validate.py` must cite it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.sglang_contract import pinned

VALIDATOR = Path(__file__).with_name("validate.py")
#: (file under sglang/srt, line, text the line holds): every line validate.py's copies rest on.
PINS = [
    # The scheduler's limit: max_req_len = min(context_len - 1, max_total_num_tokens - 1), minus 5 ...
    ("managers/tp_worker.py", 543, "max_req_len = min("),
    ("managers/tp_worker.py", 544, "self.model_config.context_len - 1,"),
    ("managers/tp_worker.py", 545, "self.model_runner.effective_max_total_num_tokens * self.ps.attn_dcp_size"),
    ("managers/tp_worker.py", 555, "max_req_len,"),
    ("managers/tp_worker.py", 556, "max_req_len - 5,"),
    # ... which the scheduler takes as its max_req_input_len (the sixth value, after max_req_len) ...
    ("managers/scheduler.py", 1089, "self.max_req_len,"),
    ("managers/scheduler.py", 1090, "self.max_req_input_len,"),
    ("managers/scheduler.py", 1097, ") = self.tp_worker.get_worker_info()"),
    # ... and refuses a prompt at or over it.
    ("managers/scheduler.py", 2835, "if len(req.origin_input_ids) >= self.max_req_input_len:"),
    ("managers/utils.py", 219, "if len(req.origin_input_ids) >= max_req_input_len:"),
    # The vocabulary: only token_ids_logprob is checked; the input-ids check exists but is never called.
    ("managers/tokenizer_manager.py", 1312, "if token_id < 0 or token_id >= vocab_size:"),
    ("managers/tokenizer_manager.py", 1318, "def _validate_input_ids_in_vocab("),
]


@pytest.fixture(scope="module")
def sglang_source() -> Path:
    python = pinned.contract_python()
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    source = Path(purelib) / "sglang" / "srt"
    assert (Path(purelib) / "sglang-0.5.19.dist-info").is_dir(), f"not SGLang 0.5.19: {purelib}"
    return source


@pytest.mark.parametrize(("path", "line", "text"), PINS, ids=[f"{path}:{line}" for path, line, _ in PINS])
def test_the_copied_rule_rests_on_this_line(sglang_source: Path, path: str, line: int, text: str) -> None:
    assert text in (sglang_source / path).read_text().splitlines()[line - 1]


def test_the_validator_cites_every_pinned_line() -> None:
    cited = VALIDATOR.read_text()
    for path, line, _ in PINS:
        ranges = re.findall(rf"{re.escape(path)}:(\d+)(?:-(\d+))?", cited)
        assert any(int(start) <= line <= int(end or start) for start, end in ranges), f"validate.py omits {path}:{line}"


def test_input_ids_are_never_checked_against_the_vocabulary(sglang_source: Path) -> None:
    uses = [
        f"{file.relative_to(sglang_source)}:{number}"
        for file in sglang_source.rglob("*.py")
        for number, text in enumerate(file.read_text(errors="replace").splitlines(), 1)
        if "_validate_input_ids_in_vocab" in text
    ]
    assert uses == ["managers/tokenizer_manager.py:1318"]


def test_the_copied_reserve_is_the_one_pinned() -> None:
    assert re.search(r"^SCHEDULER_RESERVED = 5\b", VALIDATOR.read_text(), re.MULTILINE)
