"""The settings of image assets (a vision backend only; `request/images.py`), a part of
`config.Settings`, which inherits them; read, documented and mirrored by CLI flags exactly as every
other `OPENJEV_*` setting.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings

from openjev.options import ImageTransfer


class ImageSettings(BaseSettings):
    max_images: int = Field(128, ge=1, description="Images per request, on every route.")
    max_image_bytes: int = Field(10 * 1024 * 1024, ge=1024, description="Bytes of one image as sent.")
    max_image_total_bytes: int = Field(32 * 1024 * 1024, ge=1024, description="Bytes of a request's images.")
    max_image_body_bytes: int = Field(40 * 1024 * 1024, ge=1024, description="Body size where images may be.")
    max_image_pixels: int = Field(1024 * 1024, ge=1024, description="Pixels a larger image is resized to fit.")
    max_image_source_pixels: int = Field(40_000_000, ge=1024, description="Pixels of an image as sent, at most.")
    image_cache_bytes: int = Field(64 * 1024 * 1024, ge=0, description="Prepared images kept, by sha256; 0: none.")
    max_image_positions: int = Field(
        16384,
        ge=1,
        description="Model positions a request's images take, over all its prompts: each placeholder that a prompt "
        "shows (the state once, each question's text once per view) counts its image's positions; more get 422.",
    )
    max_image_backend_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Image bytes the backend loads per request (x the calls showing each)."
    )
    image_transfer: ImageTransfer = Field(
        ImageTransfer.auto,
        description="How SGLang gets a prepared image: `file` (written once as a content-addressed PNG under "
        "OPENJEV_IMAGE_DIR, its path sent; SGLang must read this machine's files), `base64` (in every call that "
        "shows it), `auto` (`file` for a supervised SGLang, `base64` for --connect).",
    )
    image_dir: Path | None = Field(
        None,
        description="Where `file` transfer writes images (default: a new private directory, removed at shutdown; "
        "a directory given here is shared with SGLang and only openjev's own files in it are removed).",
    )
    image_file_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Bytes of image files kept for SGLang (`file` transfer), least recently used removed past it; "
        "a file a call in flight names stays until the call ends.",
    )
    encoded_image_cache_bytes: int = Field(
        32 * 1024 * 1024, ge=0, description="Bytes of base64 images kept for SGLang (`base64` transfer); 0: none."
    )
