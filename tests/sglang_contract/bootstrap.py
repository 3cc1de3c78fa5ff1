"""Import SGLang 0.5.19's request and argument classes on a CPU-only machine (test-only).

PyPI's torchvision wheels link libtorch_cuda/libc10_cuda, so they do not load on the CPU torch
wheel; yet sglang imports torchvision at module load (`srt/utils/common.py:95`
`from torchvision.io import decode_jpeg`, `srt/configs/deepseek_ocr.py:7-8`) and its image-processor
registrations (`srt/configs/utils.py:18`) need transformers to believe torchvision is installed.
None of it runs on the request-validation / CLI-parsing path, so every `torchvision.*` module is
a stand-in whose attributes are inert placeholders (calling one raises).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class _Placeholder(type):
    """Any attribute of a stand-in module: a class whose attributes are placeholders too."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(name, (), {})

    def __call__(cls, *args, **kwargs):
        raise NotImplementedError(f"torchvision stand-in: {cls.__name__} is not available")

    def __or__(cls, other):  # used in type annotations evaluated at import time
        return cls

    __ror__ = __or__

    def __getitem__(cls, item):
        return cls


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Placeholder(name, (), {})
        setattr(self, name, value)
        return value


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        if spec.name == "torchvision":
            module.__version__ = "0.28.0+standin"
        return module

    def exec_module(self, module):
        pass


def prepare() -> None:
    """Install the torchvision stand-in unless a working torchvision is importable."""
    if any(isinstance(finder, _StandInFinder) for finder in sys.meta_path):
        return
    try:
        import torchvision  # noqa: F401

        return
    except Exception:
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    sys.meta_path.insert(0, _StandInFinder())
