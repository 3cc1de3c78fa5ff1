"""The client commands (`openjev tasks|eval|classify`) load no server: importing their modules loads no
web framework and no module of the server's stages, only the client side, the wire schema and the
shared constants (`openjev.endpoints`)."""

from __future__ import annotations

import json
import subprocess
import sys

CLIENT_MODULES = ("openjev.batch.task_commands", "openjev.batch.task_fit", "openjev.batch.file_commands")
#: Packages of the server: a client needs none of them.
SERVER_STAGES = ("api", "service", "engine", "answering", "backends", "prompting")
SERVER = ("fastapi", "starlette", "uvicorn", "torch", "transformers", *(f"openjev.{stage}" for stage in SERVER_STAGES))
#: openjev modules the three load today (28): the client side, the request's wire schema, the settings.
MOST_OPENJEV_MODULES = 36


def loaded_by(modules: tuple[str, ...]) -> list[str]:
    """The modules a fresh interpreter holds after importing `modules` (a subprocess: this one has more)."""
    code = f"import sys, json; import {', '.join(modules)}; print(json.dumps(sorted(sys.modules)))"
    return json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def test_the_client_commands_load_no_server_module() -> None:
    loaded = loaded_by(CLIENT_MODULES)
    assert set(CLIENT_MODULES) <= set(loaded)
    server = [name for name in loaded if any(name == pkg or name.startswith(pkg + ".") for pkg in SERVER)]
    assert server == []
    openjev = [name for name in loaded if name.split(".")[0] == "openjev"]
    assert len(openjev) <= MOST_OPENJEV_MODULES, openjev


def test_the_check_sees_a_server_module() -> None:
    assert "fastapi" in loaded_by(("openjev.api.routes",))
