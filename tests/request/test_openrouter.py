"""OpenRouter's slugs read as the names `/v1/systemone` takes, and its catalog's `output_modalities` filter."""

from __future__ import annotations

import pytest

from openjev.request.openrouter import modalities_asked, model_of_slug

ACCEPTED = frozenset({"jev-latest", "Qwen/Qwen3.6-35B-A3B", "gpt-6-luna", "openjev-think", "qwen2.5:1.5b"})


@pytest.mark.parametrize(
    ("slug", "model"),
    [
        ("jev-latest", "jev-latest"),
        ("Qwen/Qwen3.6-35B-A3B", "Qwen/Qwen3.6-35B-A3B"),
        ("~typesafe/jev-latest", "jev-latest"),
        ("typesafe/jev-latest", "jev-latest"),
        ("typesafe/jev-1.14", "jev-latest"),
        ("typesafe/jev-1.13", "jev-latest"),
        ("typesafe/jev-1.13-20260917", "jev-latest"),
        ("openai/gpt-6-luna-decisions", "gpt-6-luna"),
        ("openai/gpt-6-luna", "gpt-6-luna"),
        ("~typesafe/jev-latest:nitro", "jev-latest"),
        ("typesafe/jev-1.14:floor", "jev-latest"),
        ("Qwen/Qwen3.6-35B-A3B:exacto", "Qwen/Qwen3.6-35B-A3B"),
        ("qwen2.5:1.5b", "qwen2.5:1.5b"),
        ("ollama/qwen2.5:1.5b", "qwen2.5:1.5b"),
        ("ollama/qwen2.5:1.5b:nitro", "qwen2.5:1.5b"),
    ],
)
def test_a_slug_of_the_served_model_reads_as_its_name(slug, model):
    assert model_of_slug(slug, ACCEPTED) == model


@pytest.mark.parametrize(
    "slug",
    [
        "anthropic/claude-opus-latest",
        "typesafe/jev-latest:free",  # a catalog variant: a model of its own, not served here
        "typesafe/jev-latest:thinking",
        "cloudflare/jev-1.14",  # a Jev release is TypeSafe's
        "typesafe/jev-next",
        "typesafe/jev-1.14-beta",
        "openai/gpt-7-decisions",
        "",
    ],
)
def test_any_other_slug_stays_as_sent(slug):
    assert model_of_slug(slug, ACCEPTED) == slug


def test_the_output_modalities_filter_is_a_comma_separated_set_or_all():
    assert modalities_asked("decisions") == {"decisions"}
    assert modalities_asked("text, image") == {"text", "image"}
    assert modalities_asked("text,all") is None
    assert modalities_asked("") == frozenset()
