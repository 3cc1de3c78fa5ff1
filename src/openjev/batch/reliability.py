"""The reliability diagram of an eval: a PNG drawn with Pillow and an HTML page that shows it with the figures.

Each question type gets one panel: the diagonal (perfect calibration) and, per equal-mass bin, a dot
at (mean confidence, accuracy) sized by the bin's count, joined in order. The HTML page embeds the
PNG as a data URL, so the two files travel apart or together.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

PANEL = 360
MARGIN = 40


def reliability_png(summary: dict[str, Any]) -> bytes:
    """One panel per question type of `summary` (the `openjev eval` figures), side by side, as PNG bytes."""
    kinds = list(summary["types"])
    image = Image.new("RGB", (max(1, len(kinds)) * (PANEL + MARGIN) + MARGIN, PANEL + 2 * MARGIN), "white")
    draw = ImageDraw.Draw(image)
    for index, kind in enumerate(kinds):
        _panel(draw, MARGIN + index * (PANEL + MARGIN), MARGIN, kind, summary["types"][kind])
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _panel(draw: ImageDraw.ImageDraw, left: int, top: int, kind: str, figures: dict[str, Any]) -> None:
    def point(confidence: float, accuracy: float) -> tuple[float, float]:
        return left + confidence * PANEL, top + (1 - accuracy) * PANEL

    draw.rectangle([left, top, left + PANEL, top + PANEL], outline="black")
    draw.line([point(0, 0), point(1, 1)], fill=(170, 170, 170), width=1)
    bins = figures["reliability"]
    draw.line([point(b["confidence"], b["accuracy"]) for b in bins], fill=(31, 119, 180), width=2)
    largest = max(b["n"] for b in bins)
    for b in bins:
        x, y = point(b["confidence"], b["accuracy"])
        radius = 3 + 5 * b["n"] / largest
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=(31, 119, 180))
    title = f"{kind}: n={figures['n']} acc={figures['accuracy']:.3f} ECE={figures['ece']:.3f}"
    draw.text((left, top - 16), title, fill="black")
    draw.text((left, top + PANEL + 6), "confidence (x) vs accuracy (y)", fill=(90, 90, 90))


def reliability_html(summary: dict[str, Any], png: bytes, title: str) -> str:
    """A self-contained page: the diagram and the figures as JSON."""
    data = base64.b64encode(png).decode()
    figures = html.escape(json.dumps(summary, indent=2))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1><img alt='reliability diagram' src='data:image/png;base64,{data}'>"
        f"<h2>Figures</h2><pre>{figures}</pre></body></html>"
    )


def write_reliability(summary: dict[str, Any], out_dir: Path, title: str) -> tuple[Path, Path]:
    png = reliability_png(summary)
    png_path, html_path = out_dir / "reliability.png", out_dir / "reliability.html"
    png_path.write_bytes(png)
    html_path.write_text(reliability_html(summary, png, title), encoding="utf-8")
    return png_path, html_path
