"""The final hidden state of llama.cpp's output rows, read in the decode that computes their logits.

llama.cpp names the model's last norm `result_norm`: the vector the output head reads, one row per
output (the graph keeps only the rows whose logits are asked for before that norm). Its embeddings
mode would return it too, but that mode makes every token of a batch an output, so the output head
would run over the whole prompt; the eval callback reads the one tensor instead. ggml's scheduler asks
the callback about every graph node (`ask`), computes up to a node it wants and hands it over; the
callback wants none while `armed` is off, so plain readouts only pay one call per node.

A batch larger than the micro-batch runs as several graphs: their rows arrive in batch order and
`take` joins them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: llama.cpp's name for the output of the final norm (`cb(cur, "result_norm", -1)` in every model graph).
FINAL_NORM = b"result_norm"


class HiddenCapture:
    """Collects `result_norm`'s rows (`width` floats each) of the decodes run while `armed`."""

    def __init__(self, ffi: Any, ll: Any, width: int) -> None:
        self._ffi, self._ll, self.width = ffi, ll, width
        self.armed = False
        self._parts: list[np.ndarray] = []
        self._error: str | None = None
        # Kept referenced: llama.cpp calls it during every decode.
        self.callback = ffi.callback("bool(struct ggml_tensor *, bool, void *)", self._on_node)

    def arm(self) -> None:
        self.armed, self._parts, self._error = True, [], None

    def take(self, outputs: int) -> list[np.ndarray]:
        """The rows captured since `arm`, one per output, in batch order; disarms. ValueError when the
        graph did not hand over exactly `outputs` rows of `width` float32 values."""
        self.armed = False
        if self._error is not None:
            raise ValueError(self._error)
        rows = np.concatenate(self._parts) if self._parts else np.empty((0, self.width), np.float32)
        if len(rows) != outputs:
            raise ValueError(f"llama.cpp's {FINAL_NORM.decode()} had {len(rows)} rows for {outputs} outputs")
        return list(rows)

    def _on_node(self, tensor: Any, ask: bool, _data: Any) -> bool:
        if not self.armed or self._ffi.string(self._ll.ggml_get_name(tensor)) != FINAL_NORM:
            return False
        if ask:
            return True
        count = self._ll.ggml_nelements(tensor)
        if count % self.width or self._ll.ggml_nbytes(tensor) != 4 * count:
            self._error = f"llama.cpp's {FINAL_NORM.decode()} is not float32 rows of {self.width}"
            return True  # False would stop the decode
        values = np.empty(count, dtype=np.float32)
        self._ll.ggml_backend_tensor_get(tensor, self._ffi.from_buffer(values), 0, 4 * count)
        self._parts.append(values.reshape(-1, self.width))
        return True
