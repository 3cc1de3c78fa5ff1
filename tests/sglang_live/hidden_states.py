"""A real SGLang's hidden state at the answer position, read by openjev's SGLang backend, set against the
torch runtime's on the same weights (both float32): the vector a task's head reads must be the same
one whichever backend serves it.

Both are the model's final norm output at the prompt's last token (SGLang's `return_hidden_states:
"last"`, granted by the supervised launch's `--return-hidden-states-mode last`; the torch runtime's
decoder output there). In float32 the two differ only by summation order (SGLang's chunked prefill, its
own RMSNorm and attention kernels): measured on 0.5.19 with the 0.5B model, a cosine distance under
1e-7 (computed in float32 it rounds to 0). That another position's state is far is checked on the torch
runtime alone (`tests/backends/embedded/test_torch_hidden.py`).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import numpy as np

from openjev.backends.base import LabelLogprobs, ReadoutCall
from openjev.backends.embedded import EmbeddedBackend
from openjev.backends.sglang import SGLangBackend

#: Largest cosine distance allowed between the two backends' states.
COSINE = 1e-3
PROMPT = (
    "<|im_start|>user\nMy parcel never arrived. Is this about shipping? A: yes B: no<|im_end|>\n"
    "<|im_start|>assistant\nAnswer:"
)


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)  # float32 rounds a cosine this close to 1 to 1.0
    return 1.0 - float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


async def _read(backend: SGLangBackend | EmbeddedBackend, ids: list[int], labels: list[int]) -> LabelLogprobs:
    try:
        await backend.start()
        return await backend.readout(ReadoutCall(uuid.uuid4().hex, ids, labels, hidden_state=True))
    finally:
        await backend.aclose()


def check_hidden_state(openjev_url: str, sglang_port: int, model_dir: Path, version: str) -> None:
    """openjev says SGLang serves hidden states and SGLang's and the torch runtime's agree; on 0.5.23,
    whose HTTP layer refuses `"last"` (`backends/sglang_hidden.py`), that it does not, naming 0.5.19."""
    from tokenizers import Tokenizer

    support = httpx.get(f"{openjev_url}/v1/limits", timeout=30).json()["hidden_states"]
    if version == "0.5.23":
        assert support["available"] is False and "0.5.19" in support["enable"], support
        return
    assert support["available"] is True, support
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = tokenizer.encode(PROMPT).ids
    labels = [tokenizer.encode(label).ids[0] for label in (" A", " B")]
    live = asyncio.run(_read(SGLangBackend(f"http://127.0.0.1:{sglang_port}"), ids, labels))
    # The converted checkpoint the model directory links to, as the live suite's embedded reference loads it.
    weights = model_dir.joinpath("model.safetensors").resolve().parent
    local = asyncio.run(_read(EmbeddedBackend(str(weights), dtype="float32"), ids, labels))
    assert live.hidden_state is not None and local.hidden_state is not None
    assert live.hidden_state.shape == local.hidden_state.shape
    distance = cosine_distance(live.hidden_state, local.hidden_state)
    print(
        f"live hidden state: {live.hidden_state.shape[0]} wide, cosine distance to the torch runtime's {distance:.1e}"
    )
    assert distance < COSINE
