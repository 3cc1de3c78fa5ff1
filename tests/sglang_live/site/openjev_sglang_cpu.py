"""Imported at start-up by every process of the test-only SGLang environment (a `.pth` file the live
tests write): SGLang spawns its scheduler and detokenizer, so hooks installed by the launcher alone
would not reach them. Installs the torchvision stand-in of `tests/sglang_contract/bootstrap.py`;
`sgl_kernel` resolves to the stand-in beside this file."""

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
