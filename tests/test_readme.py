"""The README and the docs pages: what must exist first, install commands that never remove what
another use needs, the same test setup as `.ci/run`, a README of a few screens whose pointers reach
every docs page, and a NOTICE that names every packaged model."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
CI = (ROOT / ".ci" / "run").read_text()


def shell_lines(markdown: str) -> list[str]:
    blocks = re.findall(r"^```sh\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]


def section(title: str, document: str = README) -> str:
    start = document.index(f"## {title}\n")
    return document[start : document.find("\n## ", start + 1)]


def test_what_must_exist_first_comes_first_and_says_how_to_get_it() -> None:
    first = section("What must exist first")
    assert README.index("## What must exist first") < README.index("## Quick start")
    assert "https://astral.sh/uv/install.sh" in first and "pip install uv" in first
    assert "`npm`" in first and "Chromium" in first and "optional" in first
    assert "--inexact" in first and "`cpu` extra" in first


def test_no_install_command_removes_what_another_use_needs() -> None:
    documents = {"README.md": README, "evals/README.md": (ROOT / "evals" / "README.md").read_text(), **DOCS}
    for name in ("README.md", "evals/README.md", "sglang-and-modal.md", "development.md"):
        assert any(line.startswith("uv sync") for line in shell_lines(documents[name])), name
    for name, document in documents.items():
        syncs = [line for line in shell_lines(document) if line.startswith("uv sync")]
        assert all("--inexact" in shlex.split(line) for line in syncs), (name, syncs)


def test_the_development_install_is_what_ci_installs() -> None:
    (ci,) = [line for line in CI.splitlines() if line.startswith("uv sync")]
    ci_words = set(shlex.split(ci)) - {"--frozen", "--compile-bytecode"}
    for document in (section("Development"), DOCS["development.md"]):
        (development,) = [line for line in shell_lines(document) if line.startswith("uv sync")]
        assert set(shlex.split(development)) - {"--inexact"} == ci_words


def test_readme_and_ci_agree_on_the_sglang_environment_and_the_skip_guard() -> None:
    build = "tests/sglang_contract/build-env"
    development = DOCS["development.md"]
    assert re.search(rf"^{re.escape(build)}$", CI, re.MULTILINE) and f"`{build}`" in development
    assert re.search(r"^CI=1 uv run pytest\b", CI, re.MULTILINE) and "sets `CI=1`" in development


def test_the_live_tolerance_is_the_one_the_readme_states() -> None:
    from tests.sglang_live.test_live import TOLERANCE

    assert TOLERANCE == {"float32": 1e-3, "bfloat16": 1e-2, "int8": 0.1}
    text = " ".join(DOCS["sglang-and-modal.md"].split())
    assert "every probability within 1e-3 when the embedded backend runs float32" in text
    assert "within 1e-2 where it picks bfloat16" in text and "(to 1e-6)" not in text
    assert "within 0.1 where it picks int8" in text


def test_the_readme_fits_in_a_few_screens_and_points_at_every_docs_page() -> None:
    assert len(README.splitlines()) <= 250
    linked = set(re.findall(r"\]\(docs/([a-z-]+\.md)\)", README))
    assert linked == set(DOCS), set(DOCS) ^ linked


def test_the_served_reference_names_every_docs_page() -> None:
    from openjev.api.docs import GUIDE_PAGES, GUIDES

    assert set(GUIDE_PAGES) == set(DOCS)
    assert all(f"`docs/{page}`" in GUIDES for page in DOCS)


def test_links_between_pages_reach_a_page_and_a_heading_that_exist() -> None:
    def anchors(document: str) -> set[str]:
        headings = re.findall(r"^#+ (.+)$", document, re.MULTILINE)
        return {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-") for heading in headings}

    for name, document in {"README.md": README, **DOCS}.items():
        for target, anchor in re.findall(r"\]\((?!https?:)([a-z-]*\.md)?(?:#([a-z0-9-]+))?\)", document):
            page = DOCS.get(target.removeprefix("docs/")) if target else document
            assert page is not None, (name, target)
            assert not anchor or anchor in anchors(page), (name, target, anchor)


def test_the_notice_names_every_packaged_model_with_its_checksum() -> None:
    from openjev.backends.embedded.model_source import PACKAGED_MODELS

    notice = (ROOT / "NOTICE").read_text()
    for model in PACKAGED_MODELS.values():
        assert model.sha256 in notice, model.key
        parts = f"{model.dist_prefix}1 .. {model.dist_prefix}{model.parts}, version {model.version}"
        assert parts in " ".join(notice.split()), model.key
        assert f"{model.size:,} bytes" in notice, model.key


def test_the_distribution_has_a_name_of_its_own_and_the_command_is_openjev() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "openjev-server"
    assert project["scripts"] == {"openjev": "openjev.cli:app"}
    assert "pip install 'openjev[" not in README + "".join(DOCS.values())


def test_the_readme_clients_table_is_the_one_the_clients_page_keeps() -> None:
    def table(document: str) -> list[str]:
        part = section("Clients that work unchanged", document)
        return [line for line in part.splitlines() if line.startswith("|")]

    rows = table(README)
    assert len(rows) >= 8 and rows == table(DOCS["clients.md"])
    assert any("client.decisions" in row for row in rows) and any("/api/alpha/decisions" in row for row in rows)
