"""Answer quality side by side: jev-dev against SGLang's own `/v1/systemone` (A) and openjev over the same process (B).

One SGLang >= 0.5.21, started here on the CPU with the test model exactly as
`benchmarks/systemone_side_by_side.py` starts it (its `SGLangProcess`), or an existing one at `--url`.
The evals harness (`evals/run.py jev-dev`, dev data only) asks A, SGLang's own endpoint (its own
prompt, lowercase `yes`/`no` and its own labels), the first `--limit` states into DIR/sglang-own; then
`openjev serve --connect` in front of the same process, with openjev's default answer settings, the
same states into DIR/openjev. Both are run directories as `evals/README.md` describes (A records the
`/v1/models` and `/v1/limits` it could not read in openjev's shape in run.json `server_unread`).
Printed at the end: `evals/compare.py --type T DIR/sglang-own DIR/openjev` for each question type and
for all of them, the paired difference B - A with its bootstrap interval. A directory already holding
runs is resumed only against the same URLs, so a second invocation (openjev on a new port) needs a new DIR.

    uv run python benchmarks/systemone_jev_dev.py --limit 20 --out evals/runs/DIR [--url URL]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.systemone_side_by_side import SGLangProcess  # noqa: E402
from tests.conftest import launch_openjev, stop_openjev  # noqa: E402

TYPES = ("noul", "choice", "score")


def evals(*args: str) -> int:
    """An evals command line (`run.py`, `compare.py`) of this checkout, its output passed through."""
    return subprocess.run([sys.executable, *args], cwd=ROOT).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, required=True, help="the first N jev-dev states, for A and B alike")
    parser.add_argument("--out", type=Path, required=True, help="DIR: the runs go to DIR/sglang-own and DIR/openjev")
    parser.add_argument("--url", help="an SGLang >= 0.5.21 (Python frontend) already running")
    parser.add_argument("--sglang-python", type=Path, default=ROOT / ".cache" / "sglang-0.5.23" / "bin" / "python")
    parser.add_argument("--context-length", type=int, default=8192, help="for a started SGLang")
    args = parser.parse_args()

    sglang = None if args.url else SGLangProcess(args.sglang_python, args.context_length)
    try:
        if sglang is not None:
            sglang.wait()
        url = args.url or sglang.url  # type: ignore[union-attr]
        own, ours = args.out / "sglang-own", args.out / "openjev"
        evals("evals/run.py", "jev-dev", "--url", url, "--limit", str(args.limit), "--out", str(own))
        tokenizer = httpx.get(f"{url}/model_info", timeout=30).json()["tokenizer_path"]
        # openjev's default 120 s per request is too short for a law state's views on a loaded CPU.
        openjev = launch_openjev("--connect", url, "--tokenizer", tokenizer, log_dir=Path(tempfile.mkdtemp()),
                                 env={"OPENJEV_REQUEST_TIMEOUT": "900"}, timeout=300)  # fmt: skip
        try:
            evals("evals/run.py", "jev-dev", "--url", openjev.url, "--limit", str(args.limit), "--out", str(ours))
        finally:
            stop_openjev(openjev)
        for kind in TYPES:
            print(f"\n{kind}: A = SGLang's own, B = openjev")
            evals("evals/compare.py", "--type", kind, str(own), str(ours))
        print("\nall types")
        evals("evals/compare.py", str(own), str(ours))
    finally:
        if sglang is not None:
            sglang.stop()


if __name__ == "__main__":
    main()
