"""Hidden states with SGLang's readouts: asked per `/generate`, allowed by how the server was launched.

Read in SGLang 0.5.19 (`managers/io_struct.py` `GenerateReqInput.return_hidden_states`,
`managers/schedule_batch.py` `get_return_hidden_states_mode`, `managers/tokenizer_manager.py`,
`managers/scheduler_components/batch_result_processor.py` `_append_prefill_hidden_states`,
`model_executor/forward_batch_info.py` `get_server_return_hidden_states_mode`):

- A readout asks with `"return_hidden_states": "last"`; in the list form the value is one entry per
  readout (`"last"` or `false`), as long as the batch. A readout that does not ask sends no key at all,
  so its body stays exactly the plain readout's.
- The server allows it when launched with `--return-hidden-states-mode last` (or `full`, or the legacy
  `--enable-return-hidden-states`, which means `full`); otherwise the request is refused with a 400
  ("The server is not configured to return hidden states"). The Python frontend's `/server_info` lists
  its server args, `return_hidden_states_mode` and `enable_return_hidden_states` among them; a server
  that does not list them (the Rust frontend) is taken as not allowing it.
- SGLang 0.5.23 serves `/generate` through its Rust HTTP layer, which takes `return_hidden_states` as a
  bool or a list of bools only: `"last"` is refused with a 400 ("expected a value or an array of values
  for BoolOrList"), and `true` needs `--return-hidden-states-mode full` (every prompt position's state).
  So from 0.5.23 on (`LAST_REFUSED_FROM`) hidden states are taken as unavailable, naming the release
  that serves them; read on the live CPU suite's 0.5.23.
- The answer's `meta_info.hidden_states` is then one flat list of floats: the state at the last
  prefill position (the prompt's last token; a readout generates one token, so no decode step
  follows), as the logits processor receives it, after the model's final norm.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openjev.backends.base import BackendError, HiddenStates, HiddenStatesUnavailable, LabelLogprobs, ReadoutCall

#: The launch arguments that allow hidden states at the last position (the supervised launch adds them).
LAUNCH_ARGS = ("--return-hidden-states-mode", "last")
ENABLE = "start SGLang with --return-hidden-states-mode last"
#: The widest hidden state read (the largest open models are about 16k wide); a longer list is an error.
MAX_WIDTH = 65_536
MODES = ("last", "full")
#: The first release whose HTTP layer refuses `"return_hidden_states": "last"` (module doc).
LAST_REFUSED_FROM = (0, 5, 23)


def _release(version: Any) -> tuple[int, ...] | None:
    numbers = re.findall(r"\d+", version) if isinstance(version, str) else []
    return tuple(int(number) for number in numbers[:3]) if len(numbers) >= 3 else None


def server_support(server_info: dict[str, Any]) -> HiddenStates:
    """What `/server_info`'s server args say of hidden states; a server that does not list them is
    taken as not allowing them."""
    if "return_hidden_states_mode" not in server_info:
        return HiddenStates(False, enable=f"{ENABLE} and its Python frontend, whose /server_info says so")
    release = _release(server_info.get("version"))
    if release is not None and release >= LAST_REFUSED_FROM:
        refused = f'SGLang {server_info["version"]}\'s /generate refuses return_hidden_states "last"'
        return HiddenStates(False, enable=f"{refused}: serve with SGLang 0.5.19 (the pinned release)")
    allowed = server_info.get("return_hidden_states_mode") in MODES or server_info.get("enable_return_hidden_states")
    return HiddenStates(True) if allowed is True else HiddenStates(False, enable=ENABLE)


Body = Callable[[list[str] | None], dict[str, Any]]


def asking(body: Body, calls: Sequence[ReadoutCall], support: HiddenStates) -> Body:
    """`body` with `return_hidden_states` where a call asks for it (one entry per readout in the list
    form); `body` itself where none does. HiddenStatesUnavailable where the server does not allow it."""
    asked = [call.hidden_state for call in calls]
    if not any(asked):
        return body
    if not support.available:
        raise HiddenStatesUnavailable(f"SGLang returns no hidden states: {support.enable}")
    value: Any = "last" if len(calls) == 1 else ["last" if ask else False for ask in asked]
    return lambda image_data: {**body(image_data), "return_hidden_states": value}


def read(found: LabelLogprobs, answer: Any, call: ReadoutCall) -> LabelLogprobs:
    """`found` with the hidden state of `answer` where `call` asked for it; a BackendError where the
    answer lacks one or holds anything but a flat list of finite numbers."""
    if not call.hidden_state:
        return found
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    values = meta.get("hidden_states") if isinstance(meta, dict) else None
    if not isinstance(values, list) or not 0 < len(values) <= MAX_WIDTH:
        raise BackendError("SGLang's answer lacks the hidden state it was asked for")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise BackendError("SGLang returned a hidden state that is not a flat list of finite numbers")
    hidden = np.asarray(values, np.float32)
    return LabelLogprobs(found.logprobs, found.prompt_tokens, found.cached_tokens, hidden, found.top_token)


def read_all(found: list[LabelLogprobs], answers: list[Any], calls: Sequence[ReadoutCall]) -> list[LabelLogprobs]:
    """`read` of each readout of a batch (`answers` as `sglang_readouts.parse_batch` checked them)."""
    return [read(one, answer, call) for one, answer, call in zip(found, answers, calls, strict=True)]
