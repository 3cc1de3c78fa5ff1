"""How prepared images reach SGLang 0.5.19: `image_data` entries, one per image pad, in pad order.

SGLang's loader (`utils/common.py` `load_image`, read from the 0.5.19 wheel) takes each entry as a
URL, a `file://` URL or a local path with an image extension (`.png`, ...; an absolute path is read
with `open`), a `data:` URL, else as base64. Either way it decodes the same file to the same pixels, and the image's
hash (the radix-cache key of its positions and the embedding cache's key) is computed from the
processed pixel values (`MultimodalDataItem.set_pad_value` -> `hash_feature`), not from the entry,
so a path and base64 give the same cache hits.

- `Base64Images` (OPENJEV_IMAGE_TRANSFER=base64, and `auto` for --connect: even a loopback address
  does not prove that SGLang reads this machine's files, a container behind a forwarded port does
  not; `file` with a shared OPENJEV_IMAGE_DIR says that it does): each call carries the base64 of
  every image it shows (a JPEG's as a `data:image/jpeg;base64,` URL: bare, its "/9j/" start reads
  as a path); the encodings of recent images are kept, bounded in bytes
  (OPENJEV_ENCODED_IMAGE_CACHE_BYTES).
- `ImageFiles` (`file`, and `auto` for a supervised SGLang, which runs on this machine and reads its
  files): each image is written once as `<OPENJEV_IMAGE_DIR>/openjev-<sha256>.<png|jpg>` (its
  content names it; written to a temporary name and renamed, so SGLang never reads half a file) and
  calls carry its path, a few dozen bytes instead of megabytes per call. Files are bounded in bytes
  (OPENJEV_IMAGE_FILE_BYTES): past it the least recently used are removed, but never one that a call
  in flight names (`held`). At shutdown openjev removes its files, and the directory when it made it.
Both are shared by concurrent calls (a lock guards their books; the work runs outside it).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from openjev.config import Settings
from openjev.options import ImageTransfer
from openjev.request.images import ImageInput

log = logging.getLogger("openjev.sglang")

#: A JPEG's base64 goes as a data URL (a PNG's bare, as 0.5.19 reads either).
JPEG_DATA_URL = "data:image/jpeg;base64,"
#: The file name's extension per format (0.5.19's loader reads a path only with an image extension).
EXTENSIONS = {"PNG": "png", "JPEG": "jpg"}
#: What a kept entry costs beyond its bytes (its key and book-keeping), so that zero-byte images still count.
ENTRY_OVERHEAD = 256


class ImageTransport(Protocol):
    """`held(images)` around a call; `entries(images)` (blocking: may encode or write) inside it."""

    kind: ImageTransfer

    def held(self, images: Sequence[ImageInput]) -> contextlib.AbstractContextManager[None]: ...

    def entries(self, images: Sequence[ImageInput]) -> list[str]: ...

    def close(self) -> None: ...


class Base64Images:
    """`image_data` as base64 PNGs; recent encodings kept by sha256, `capacity_bytes` at most."""

    kind = ImageTransfer.base64

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.bytes = 0
        self._encoded: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def held(self, images: Sequence[ImageInput]) -> Iterator[None]:
        yield

    def entries(self, images: Sequence[ImageInput]) -> list[str]:
        return [self._one(image) for image in images]

    def _one(self, image: ImageInput) -> str:
        with self._lock:
            found = self._encoded.get(image.sha256)
            if found is not None:
                self._encoded.move_to_end(image.sha256)
                return found
        encoded = base64.b64encode(image.data).decode("ascii")
        if image.kind == "JPEG":
            # A bare base64 JPEG starts with "/9j/", which 0.5.19's loader reads as a file path.
            encoded = JPEG_DATA_URL + encoded
        cost = len(encoded) + ENTRY_OVERHEAD
        with self._lock:
            if cost <= self.capacity_bytes and image.sha256 not in self._encoded:
                while self.bytes + cost > self.capacity_bytes:
                    _, old = self._encoded.popitem(last=False)
                    self.bytes -= len(old) + ENTRY_OVERHEAD
                self._encoded[image.sha256] = encoded
                self.bytes += cost
        return encoded

    def close(self) -> None:
        with self._lock:
            self._encoded.clear()
            self.bytes = 0


class ImageFiles:
    """`image_data` as paths of files openjev writes once per image (see the module docstring)."""

    kind = ImageTransfer.file

    def __init__(self, directory: Path | None, capacity_bytes: int) -> None:
        self._owns_directory = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="openjev-images-")) if directory is None else directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.capacity_bytes = capacity_bytes
        self.bytes = 0
        #: sha256 -> the file's path and size, least recently used first.
        self._files: OrderedDict[str, tuple[Path, int]] = OrderedDict()
        self._holds: Counter[str] = Counter()
        self._lock = threading.Lock()

    def path(self, image: ImageInput) -> Path:
        return self.directory / f"openjev-{image.sha256}.{EXTENSIONS[image.kind]}"

    @contextlib.contextmanager
    def held(self, images: Sequence[ImageInput]) -> Iterator[None]:
        digests = [image.sha256 for image in images]
        with self._lock:
            self._holds.update(digests)
        try:
            yield
        finally:
            with self._lock:
                self._holds.subtract(digests)
                self._holds += Counter()  # drops the zero counts
                self._evict()

    def entries(self, images: Sequence[ImageInput]) -> list[str]:
        return [str(self._written(image)) for image in images]

    def _written(self, image: ImageInput) -> Path:
        path = self.path(image)
        with self._lock:
            if image.sha256 in self._files:
                self._files.move_to_end(image.sha256)
                return path
        staging = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        staging.write_bytes(image.data)
        os.replace(staging, path)
        with self._lock:
            if image.sha256 not in self._files:
                self._files[image.sha256] = path, len(image.data)
                self.bytes += len(image.data)
                self._evict()
        return path

    def _evict(self) -> None:
        """Past the byte bound, remove the least recently used files no call in flight names (lock held)."""
        if self.bytes <= self.capacity_bytes:
            return
        for sha256 in [key for key in self._files if not self._holds[key]]:
            if self.bytes <= self.capacity_bytes:
                break
            path, size = self._files.pop(sha256)
            self.bytes -= size
            path.unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            if self._owns_directory:
                shutil.rmtree(self.directory, ignore_errors=True)
            else:
                for path, _ in self._files.values():
                    path.unlink(missing_ok=True)
            self._files.clear()
            self.bytes = 0


def image_transport(settings: Settings, *, co_located: bool) -> ImageTransport:
    """OPENJEV_IMAGE_TRANSFER for an SGLang on this machine (`co_located`: supervised) or elsewhere."""
    transfer = settings.image_transfer
    if transfer is ImageTransfer.auto:
        transfer = ImageTransfer.file if co_located else ImageTransfer.base64
    if transfer is ImageTransfer.file:
        files = ImageFiles(settings.image_dir, settings.image_file_bytes)
        log.info("images reach SGLang as files under %s", files.directory)
        return files
    return Base64Images(settings.encoded_image_cache_bytes)
