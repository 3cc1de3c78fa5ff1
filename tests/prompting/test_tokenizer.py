"""The chat-template environment renders like transformers' own for the constructs chat templates use."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from openjev.prompting.tokenizer import ChatTokenizer, TemplateError

TEMPLATES = {
    "loop controls": (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{{ m.role }}: {{ m.content }}\n{% if loop.index > 2 %}{% break %}{% endif %}{% endfor %}"
    ),
    "tojson options": (
        "{% for m in messages %}{{ m | tojson(separators=(',', ':'), sort_keys=true) }}\n"
        "{{ m | tojson(indent=2) }}\n{{ {'é': m.content} | tojson }}\n{% endfor %}"
    ),
    "generation block": (
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}"
        "{% else %}{{ m.content }}{% endif %}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}"
    ),
    "namespace and dict": (
        "{% set ns = namespace(count=0) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% endfor %}"
        "{{ ns.count }} {{ dict(a=1) | tojson }} {{ bos_token }}|{{ eos_token }}"
    ),
    "trim and lstrip": (
        "{% for m in messages %}\n    {% if m.content %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}"
    ),
}

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": 'Ça va? <b>"quoted"</b>'},
    {"role": "assistant", "content": "Oui."},
    {"role": "user", "content": "And then?"},
]


def tokenizer_with(template: str, source_dir: Path, tmp_path: Path) -> ChatTokenizer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = json.loads((source_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "tokenizer.json").write_bytes((source_dir / "tokenizer.json").read_bytes())
    return ChatTokenizer(tmp_path)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_renders_exactly_like_transformers(name: str, qwen_tokenizer_dir: Path, tmp_path: Path) -> None:
    chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    template = TEMPLATES[name]
    chat = tokenizer_with(template, qwen_tokenizer_dir, tmp_path)
    ours = chat.render(MESSAGES, add_generation_prompt=True)
    theirs = chat_template_utils._compile_jinja_template(template).render(
        messages=MESSAGES,
        add_generation_prompt=True,
        enable_thinking=False,
        tools=None,
        bos_token=chat.bos_token or "",
        eos_token=chat.eos_token or "",
    )
    assert ours == theirs and ours.strip()


def test_raise_exception_and_sandbox(qwen_tokenizer_dir: Path, tmp_path: Path) -> None:
    refusing = tokenizer_with("{{ raise_exception('roles must alternate') }}", qwen_tokenizer_dir, tmp_path / "a")
    with pytest.raises(TemplateError, match="roles must alternate"):
        refusing.render(MESSAGES)
    sneaky = tokenizer_with("{% set ns = namespace(__class__=1) %}", qwen_tokenizer_dir, tmp_path / "b")
    with pytest.raises((TemplateError, jinja2.exceptions.SecurityError)):
        sneaky.render(MESSAGES)


def test_the_real_qwen3_template_renders_with_thinking_off(qwen_tokenizer_dir: Path) -> None:
    rendered = ChatTokenizer(qwen_tokenizer_dir).render(MESSAGES, add_generation_prompt=True)
    assert rendered.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_remembered_attribute_checks_agree_with_jinja2s_sandbox(qwen_tokenizer_dir: Path, tmp_path: Path) -> None:
    template = "{% for m in messages %}{{ loop.index }}{{ m.items() | list | length }}{% endfor %}"
    env = tokenizer_with(template, qwen_tokenizer_dir, tmp_path)._template.environment
    reference = ImmutableSandboxedEnvironment()
    namespace = env.globals["namespace"](count=0)
    loop = LoopContext(iter([1]), jinja2.Undefined)
    samples = ["text", {"role": "user"}, [1, 2], (1,), 3, 2.5, True, None, namespace, loop]
    assert type(loop) in env._MEMO_TYPES and type(namespace) in env._MEMO_TYPES
    names = ["strip", "format", "mro", "items", "get", "pop", "update", "append", "clear", "index", "__class__", "_x"]
    for sample in samples:
        for name in names:
            for _ in range(2):  # the second answer comes from the memo
                value = getattr(sample, name, None)
                assert env.is_safe_attribute(sample, name, value) == reference.is_safe_attribute(sample, name, value)


@pytest.mark.parametrize(
    "template",
    [
        "{% for m in messages %}{{ m.pop('role') }}{% endfor %}",
        "{% for m in messages %}{{ messages.append(m) }}{% endfor %}",
        "{% for m in messages %}{{ m.content.__class__.__mro__ }}{% endfor %}",
    ],
)
def test_unsafe_reads_are_refused_every_time(qwen_tokenizer_dir: Path, tmp_path: Path, template: str) -> None:
    chat = tokenizer_with(template, qwen_tokenizer_dir, tmp_path)
    for _ in range(2):
        with pytest.raises((TemplateError, jinja2.exceptions.SecurityError)):
            chat.render(MESSAGES)
    assert MESSAGES[0] == {"role": "system", "content": "Be brief."} and len(MESSAGES) == 4


def test_ids_are_below_a_vocabulary_only_when_its_size_is_known_and_past_the_largest_id(
    qwen_tokenizer_dir: Path,
) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    largest = max(chat.tokenizer.get_vocab(with_added_tokens=True).values())
    assert chat.ids_below(largest + 1)
    assert not chat.ids_below(largest)
    assert not chat.ids_below(None)
