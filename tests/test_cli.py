"""The command line mirrors the settings: one flag per OPENJEV_* variable, flags over environment."""

import os
import subprocess
import sys

import httpx

from openjev.config import Settings


def test_every_setting_has_a_serve_flag():
    env = {**os.environ, "COLUMNS": "250", "TERM": "dumb"}
    help_text = subprocess.run(
        [sys.executable, "-m", "openjev", "serve", "--help"], capture_output=True, text=True, check=True, env=env
    ).stdout
    for name in Settings.model_fields:
        assert f"--{name.replace('_', '-')}" in help_text, name
        assert f"OPENJEV_{name.upper()}" in help_text, name


def test_flags_override_the_environment(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir),
        "--max-questions", "3", "--model-aliases", "house-model", "--api-key", "flag-key",
        env={"OPENJEV_MAX_QUESTIONS": "50", "OPENJEV_MAX_CHOICE_OPTIONS": "9", "OPENJEV_API_KEY": "env-key"},
    )  # fmt: skip
    headers = {"Authorization": "Bearer flag-key"}
    limits = httpx.get(f"{server.url}/v1/limits", headers=headers).json()
    assert limits["max_questions"] == 3 and limits["max_choice_options"] == 9
    question = {"type": "noul", "instructions": "Is it late?"}
    body = {"model": "house-model", "state": "x", "questions": {"q": question}}
    assert httpx.post(f"{server.url}/v1/systemone", json=body, headers=headers).status_code == 200
    too_many = {**body, "questions": {f"q{i}": question for i in range(4)}}
    assert httpx.post(f"{server.url}/v1/systemone", json=too_many, headers=headers).status_code == 422
