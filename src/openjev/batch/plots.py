"""The plots of an eval, drawn with matplotlib (the `reports` extra): `reliability.png`, `confusion.png`
and `report.html`, one self-contained page with the printed report and both images as data URIs.

Reliability: per question, the diagonal (perfect calibration) and each equal-mass bin at (mean
confidence, accuracy) with its accuracy's 95% Wilson interval, over ten equal-width bins whose row
counts are written along the bottom. Confusion: per question, the counts gold (rows) → predicted
(columns) as a heatmap, labels named and each cell's count written in it. Panels stand two to a
line. Without matplotlib nothing is drawn and `write_plots` says so.
"""

from __future__ import annotations

import base64
import html
import io
import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: What `openjev eval` prints when matplotlib is not installed.
MISSING = "plots need matplotlib: install the reports extra (uv sync --inexact --extra reports)"
PANEL_INCHES = 5.0
#: Panels side by side; more questions take more lines.
COLUMNS = 2
#: The width a panel's title is wrapped to, in characters.
TITLE_CHARS = 50
TICKS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def write_plots(summary: Mapping[str, Any], out_dir: Path, title: str, text: str) -> list[Path]:
    """The PNGs and the HTML page written into `out_dir`; ImportError (with MISSING) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise ImportError(MISSING) from None
    questions = summary["questions"]
    images = {}
    for name, draw in (("reliability", _reliability), ("confusion", _confusion)):
        columns = min(COLUMNS, len(questions))
        lines = math.ceil(len(questions) / columns)
        size = (PANEL_INCHES * columns, (PANEL_INCHES + 0.8) * lines)
        figure, axes = pyplot.subplots(lines, columns, figsize=size, squeeze=False)
        for panel, figures in zip(axes.flat, questions, strict=False):
            draw(panel, figures)
        for unused in axes.flat[len(questions) :]:
            unused.set_visible(False)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        pyplot.close(figure)
        images[name] = buffer.getvalue()
        (out_dir / f"{name}.png").write_bytes(images[name])
    page = out_dir / "report.html"
    page.write_text(report_html(title, text, images), encoding="utf-8")
    return [out_dir / "reliability.png", out_dir / "confusion.png", page]


def _title(figures: Mapping[str, Any]) -> str:
    return textwrap.fill(figures["name"], TITLE_CHARS)


def _reliability(axes: Any, figures: Mapping[str, Any]) -> None:
    bins = figures["reliability"]
    axes.plot([0, 1], [0, 1], color="0.6", linewidth=1, label="perfect calibration")
    x = [b["confidence"] for b in bins]
    y = [b["accuracy"] for b in bins]
    below = [b["accuracy"] - b["ci95"][0] for b in bins]
    above = [b["ci95"][1] - b["accuracy"] for b in bins]
    axes.errorbar(x, y, yerr=[below, above], fmt="o", color="tab:blue", capsize=3, label="bin accuracy (95% CI)")
    for b in bins:
        middle = (b["bin"][0] + b["bin"][1]) / 2
        axes.text(middle, 0.02, str(b["n"]), ha="center", fontsize=7, color="0.3")
    axes.set(xlim=(0, 1), ylim=(0, 1.02), xticks=TICKS, yticks=TICKS, aspect="equal")
    axes.set_xlabel("confidence (probability of the predicted label)\nalong the bottom: rows per bin")
    axes.set_ylabel("accuracy")
    axes.set_title(f"{_title(figures)}\nn={figures['n']}, ECE {figures['ece']:.3f}", fontsize=9)
    axes.legend(loc="upper left", fontsize=7)
    axes.grid(alpha=0.3)


def _confusion(axes: Any, figures: Mapping[str, Any]) -> None:
    confusion = figures["confusion"]
    names = [figures["label_names"][label] for label in confusion["labels"]]
    matrix = confusion["matrix"]
    axes.imshow(matrix, cmap="Blues")
    largest = max(max(line) for line in matrix) or 1
    for i, line in enumerate(matrix):
        for j, count in enumerate(line):
            axes.text(j, i, str(count), ha="center", va="center", color="white" if count > largest / 2 else "black")
    columns = confusion["labels"] if figures["type"] == "score" else names
    axes.set_xticks(range(len(names)), columns, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(names)), names, fontsize=8)
    axes.set_xlabel("predicted")
    axes.set_ylabel("gold")
    axes.set_title(f"{_title(figures)}\naccuracy {figures['accuracy']:.3f}", fontsize=9)


def report_html(title: str, text: str, images: Mapping[str, bytes]) -> str:
    """One page that needs no other file: the report as text and each image as a data URI."""
    figures = "".join(
        f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' "
        f"src='data:image/png;base64,{base64.b64encode(data).decode()}'>"
        for name, data in images.items()
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1>{figures}<h2>report</h2><pre>{html.escape(text)}</pre></body></html>"
    )
