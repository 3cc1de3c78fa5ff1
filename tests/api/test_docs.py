"""The documentation pages render offline in headless Chromium, from assets openjev serves itself.

Chromium's only route off the machine is a proxy that does not exist, so a page that needed a CDN
would render nothing. Screenshots go to the test's tmp dir (paths printed; see them with `-s`).
Skipped when no `chromium` is installed here; `.ci/run` installs Debian's.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from openjev.api.docs import ASSETS, STATIC_DIR

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGES = {"reference": "/", "swagger": "/docs"}


def chromium(url: str, profile: Path, *action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=127.0.0.1", "--virtual-time-budget=15000",
         "--window-size=1280,900", *action, url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_vendored_assets_are_the_pinned_package_files() -> None:
    for name, digest in ASSETS.items():
        assert hashlib.sha256((STATIC_DIR / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
@pytest.mark.parametrize("page", PAGES)
def test_docs_page_renders_the_api_offline(page, serve_openjev, tmp_path) -> None:
    # The pages need no backend: this one never becomes ready.
    server = serve_openjev("--connect", "http://127.0.0.1:9", "--tokenizer", str(tmp_path), ready=False)
    url = server.url + PAGES[page]
    html = httpx.get(url).text
    assert "systemone" not in html and "http" not in html.replace("http-equiv", "")  # nothing off-site
    dom = chromium(url, tmp_path / "profile", "--dump-dom")
    assert "/v1/systemone" in dom.stdout, dom.stderr[-2000:]
    screenshot = tmp_path / f"{page}.png"
    shot = chromium(url, tmp_path / "profile", f"--screenshot={screenshot}")
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
    print(f"{page} page screenshot: {screenshot}")
    assert "GET /static/" in server.log()
