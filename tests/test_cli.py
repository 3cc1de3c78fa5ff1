"""The command line mirrors the settings: one flag per OPENJEV_* variable, flags over environment."""

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_every_setting_is_in_the_settings_table():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    for name in Settings.model_fields:
        assert f"| `OPENJEV_{name.upper()}` | `--{name.replace('_', '-')}` |" in readme, name


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


def test_a_tokenizer_without_enough_single_token_labels_stops_the_server(tmp_path, fake_sglang):
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "<s>", "</s>", "Answer", ":", "Yes", "No", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["<s>", "</s>"])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    template = "{% for m in messages %}<s>{{ m.role }}\n{{ m.content }}</s>\n{% endfor %}<s>assistant\n"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "eos_token": "</s>"}))
    process = subprocess.run(
        [sys.executable, "-m", "openjev", "serve", "--connect", fake_sglang.url, "--tokenizer", str(tmp_path),
         "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == 1
    assert "yields only 26 single-token option labels" in process.stderr


def test_an_empty_api_key_stops_the_server_with_a_clear_message(fake_sglang):
    # An empty key would otherwise accept `Authorization: Bearer ` with nothing after it.
    process = subprocess.run(
        [sys.executable, "-m", "openjev", "serve", "--connect", fake_sglang.url, "--port", "0"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OPENJEV_API_KEY": ""},
    )  # fmt: skip
    assert process.returncode == 2
    assert "OPENJEV_API_KEY is empty" in process.stderr and "Traceback" not in process.stderr


def test_openapi_from_the_cli_needs_no_backend() -> None:
    out = subprocess.run([sys.executable, "-m", "openjev", "schema"], capture_output=True, check=True, text=True)
    assert "/v1/systemone" in json.loads(out.stdout)["paths"]
