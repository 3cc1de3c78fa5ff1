"""Run the fake standalone: `python -m tests.fake_sglang --port N [--rust-frontend]`."""

import argparse

import uvicorn

from tests.fake_sglang import FakeSGLang

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--rust-frontend", action="store_true")
args = parser.parse_args()
uvicorn.Server(FakeSGLang(port=args.port, rust_frontend=args.rust_frontend).uvicorn_config()).run()
