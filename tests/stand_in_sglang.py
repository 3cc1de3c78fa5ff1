"""A stand-in SGLang interpreter for the supervised-backend tests.

Run as `python stand_in_sglang.py -m sglang.launch_server FLAGS` (or with openjev's `-c` probe of the
installed sglang release).

It accepts exactly the `launch_server` flags openjev may pass (anything else exits 2, as SGLang's
argparse would), records how it was started, and serves `tests.fake_sglang.FakeSGLang` on
--host/--port with the given model path, revision, served model name, tokenizer path, context length,
API key and data-parallel ranks (--dp-size: one radix cache per rank). Like SGLang's download, it
leaves the model's `config.json` in the Hugging Face cache (only when the test set HF_HOME to a
scratch directory), where openjev reads the vocabulary size.
`SGLANG_RUST_SERVER=1` selects the fake's Rust frontend, which (like 0.5.19's) has no "starting"
state: while the stand-in is not ready, nothing listens on its port.

Environment:
- STAND_IN_RECORD: a JSON file written at start with `argv`, `pid` and the SGLang variables of the
  environment, and again with `terminated_by: "SIGTERM"` when a SIGTERM stops it; the fake's
  violations are appended to the same path plus `.violations` as they happen, and every answered
  /generate call (its ids, the rank asked for and the rank that served it) to `.calls`.
- STAND_IN_MODE: `ready` (default): ready at once; `slow`: not ready for STAND_IN_DELAY seconds;
  `crash`: exits with code 3 after STAND_IN_DELAY seconds, never ready; `hang`: never ready and
  ignores SIGTERM.
- STAND_IN_GENERATE_DELAY: seconds every /generate takes.
- STAND_IN_SGLANG_VERSION: the sglang release `-c` reports to openjev's version check (default 0.5.19).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.argv[1:2] == ["-c"] and "version('sglang')" in sys.argv[2]:
    # openjev's check of the installed release, answered before the fake's imports, as fast as SGLang's.
    print(os.environ.get("STAND_IN_SGLANG_VERSION", "0.5.19"))
    sys.exit(0)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fake_sglang import VOCAB_SIZE, FakeSGLang, payloads

CRASH_CODE = 3
RECORDED_ENV = ("SGLANG_RUST_SERVER", "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "PYTHONUNBUFFERED")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--revision")
    parser.add_argument("--tokenizer-path")
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--context-length", type=int, default=32768)
    parser.add_argument(
        "--mamba-radix-cache-strategy", choices=["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"]
    )
    parser.add_argument("--cuda-graph-backend-prefill", choices=["full", "breakable", "tc_piecewise", "disabled"])
    parser.add_argument("--api-key")
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument("--skip-server-warmup", action="store_true")
    parser.add_argument("--return-hidden-states-mode", choices=["last", "full"])
    parser.add_argument("--dp-size", "--data-parallel-size", type=int, default=1)
    return parser.parse_args(argv)


def fill_hf_cache(model_path: str, revision: str | None) -> None:
    """What SGLang's download of a hub model leaves in the cache that openjev reads config.json from."""
    if Path(model_path).is_dir() or "HF_HOME" not in os.environ:
        return
    commit = revision or "0" * 40
    repo = Path(os.environ["HF_HOME"]) / "hub" / ("models--" + model_path.replace("/", "--"))
    (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps({"vocab_size": VOCAB_SIZE}))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)


def main(argv: list[str]) -> int:
    if argv[:2] != ["-m", "sglang.launch_server"]:
        print(f"stand-in: expected '-m sglang.launch_server', got {argv[:2]}", file=sys.stderr)
        return 2
    args = parse(argv[2:])
    payloads.record_command(argv[2:])
    mode = os.environ.get("STAND_IN_MODE", "ready")
    delay = float(os.environ.get("STAND_IN_DELAY", "0"))
    record_path = Path(os.environ["STAND_IN_RECORD"])
    record: dict[str, Any] = {
        "argv": argv,
        "pid": os.getpid(),
        "env": {name: os.environ.get(name) for name in RECORDED_ENV},
    }
    record_path.write_text(json.dumps(record))

    stop = threading.Event()

    def on_sigterm(*_: object) -> None:
        record["terminated_by"] = "SIGTERM"
        record_path.write_text(json.dumps(record))
        stop.set()

    signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "hang" else on_sigterm)
    starting = {"ready": 0.0, "slow": delay}.get(mode, math.inf)
    rust = os.environ.get("SGLANG_RUST_SERVER") == "1"
    fill_hf_cache(args.model_path, args.revision)
    fake = None
    # 0.5.19's Rust frontend has no "starting" state: its port opens once the scheduler is up.
    if not (rust and math.isinf(starting)) and not stop.wait(starting if rust else 0):
        fake = FakeSGLang(
            model_path=args.model_path,
            revision=args.revision,
            violation_log=f"{record_path}.violations",
            host=args.host,
            port=args.port,
            rust_frontend=rust,
            starting_seconds=0 if rust else starting,
            context_length=args.context_length,
            generate_delay=float(os.environ.get("STAND_IN_GENERATE_DELAY", "0")),
            api_key=args.api_key,
            served_model_name=args.served_model_name or args.model_path,
            tokenizer_path=args.tokenizer_path,
            dp_size=args.dp_size,
            hidden_states_mode=args.return_hidden_states_mode,
            call_log=f"{record_path}.calls",
        ).start()
        print(f"stand-in SGLang listening on {fake.url} (mode {mode})", flush=True)
    print("stand-in SGLang: a line on stderr", file=sys.stderr, flush=True)
    if mode == "crash" and not stop.wait(delay):
        os._exit(CRASH_CODE)
    stop.wait()
    if fake is not None:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
