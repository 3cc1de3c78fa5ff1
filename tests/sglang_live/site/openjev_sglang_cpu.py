"""Imported at start-up by every process of the test-only SGLang environment (a `.pth` file the live
tests write): SGLang spawns its scheduler and detokenizer, so hooks installed by the launcher alone
would not reach them. Installs the torchvision stand-in of `tests/sglang_contract/bootstrap.py`;
`sgl_kernel` resolves to the stand-in beside this file, and is imported before
`sglang.srt.models.qwen3_5`, which binds CPU ops that the stand-in registers under `torch.ops` (importing
torch here instead would slow every process of the environment, SGLang's or not)."""

import importlib.abc
import importlib.util
import sys
from pathlib import Path

_BOOTSTRAP = Path(__file__).resolve().parents[2] / "sglang_contract" / "bootstrap.py"
_spec = importlib.util.spec_from_file_location("openjev_sglang_bootstrap", _BOOTSTRAP)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)
_module.prepare()


class _KernelOpsFirst(importlib.abc.MetaPathFinder):
    """Imports the `sgl_kernel` stand-in just before `sglang.srt.models.qwen3_5`, then lets the usual
    finders load that module: only processes that reach a Qwen-VL processor pay for it."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "sglang.srt.models.qwen3_5":
            import sgl_kernel  # noqa: F401

        return None


sys.meta_path.insert(0, _KernelOpsFirst())
