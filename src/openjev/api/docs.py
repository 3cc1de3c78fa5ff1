"""The documentation pages: the API reference at `/` (Scalar) and Swagger UI at `/docs`.

Both read `/openapi.json` and load their scripts and styles from `/static`, files vendored from npm
packages pinned to exact versions (see `static/README.md`): no CDN, so they work offline.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

STATIC_DIR = Path(__file__).with_name("static")
STATIC_PATH = "/static"

#: Every vendored file and its sha256, as copied from its pinned package.
ASSETS = {
    "scalar/standalone.js": "bf091006bdc3af6067af77c2f534812e3e633e94a94e87138069f570f33b762c",
    "swagger-ui/swagger-ui-bundle.js": "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
    "swagger-ui/swagger-ui.css": "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
}

#: The guide pages of the source tree (`docs/`), named in the reference's description so a reader of the
#: served pages finds the rest: images, SGLang and Modal, settings, performance, answer quality.
GUIDE_PAGES = {
    "api.md": "routes, requests, answers, limits, errors and headers",
    "clients.md": "the clients that work unchanged: OpenAI's Decisions API, OpenRouter's route, long contexts",
    "images-and-boxes.md": "image assets and box questions",
    "sglang-and-modal.md": "serving on SGLang and deploying on Modal",
    "scaling.md": "past one GPU",
    "thinking.md": "the thinking tier",
    "how-it-works.md": "how a request is answered, and the code's layout",
    "embedded.md": "the embedded CPU runtimes",
    "settings.md": "every OPENJEV_* setting and its flag",
    "bounds.md": "what a request can cost: each stage's bound and where it is kept",
    "performance.md": "speed, measured side by side",
    "answer-quality.md": "answer quality with intervals",
    "your-data.md": "openjev eval and classify over your own labelled file",
    "development.md": "tests, CI, benchmarks and evaluations",
}
GUIDES = (
    "Guides in the project's `docs/` folder: "
    + "; ".join(f"`docs/{page}` ({what})" for page, what in GUIDE_PAGES.items())
    + "."
)

# Scalar fetches web fonts from its own servers unless told not to.
REFERENCE_PAGE = f"""<!doctype html>
<html>
  <head>
    <title>openjev API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" data-url="/openapi.json" data-configuration='{{"withDefaultFonts": false}}'></script>
    <script src="{STATIC_PATH}/scalar/standalone.js"></script>
  </body>
</html>
"""


def swagger_ui_page(title: str) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{title} - Swagger UI",
        swagger_js_url=f"{STATIC_PATH}/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{STATIC_PATH}/swagger-ui/swagger-ui.css",
        # The default favicon is another site's; none is better than a request off the machine.
        swagger_favicon_url="data:,",
    )
