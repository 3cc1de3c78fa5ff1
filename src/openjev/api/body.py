"""ASGI middleware for request bodies: bounded size, gzip/zstd decoding, no surprises.

Contract, for every request that carries a body:
- more than `max_body_bytes` on the wire -> 413, decided from Content-Length when present and
  while reading otherwise; the rest of the body is never read into memory;
- `Content-Encoding` identity, gzip (also x-gzip) or zstd, possibly chained, is decoded with a hard
  output cap of `max_body_bytes` -> 413 past it, so a compression bomb costs at most that much;
  any other coding -> 415; a body that does not decode -> 400;
- `multipart/form-data` is how clients send image assets -> 422 naming `assets` (text only).
Downstream sees the decoded body, no Content-Encoding and a matching Content-Length; after the body,
`receive` is the server's own, so the endpoint can still notice a client disconnect.
"""

from __future__ import annotations

import io
import zlib

import zstandard
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev.api.errors import HttpError, error_response
from openjev.errors import OpenJevError, RequestRejected
from openjev.validation import ASSETS_REFUSED


def _too_large(limit: int, what: str) -> HttpError:
    return HttpError(413, "request_too_large", f"the request body {what} is over the limit of {limit} bytes")


def _undecodable(message: str) -> HttpError:
    return HttpError(400, "invalid_body", message)


def _gunzip(data: bytes, limit: int) -> bytes:
    decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = decoder.decompress(data, limit + 1)
        if len(out) > limit:
            raise _too_large(limit, "decompressed")
        if not decoder.eof:
            raise _undecodable("the gzip body is truncated")
    except zlib.error as error:
        raise _undecodable(f"the gzip body does not decode: {error}") from error
    return out


def _unzstd(data: bytes, limit: int) -> bytes:
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as error:
        raise _undecodable(f"the zstd body does not decode: {error}") from error
    if len(out) > limit:
        raise _too_large(limit, "decompressed")
    return out


DECODERS = {"gzip": _gunzip, "x-gzip": _gunzip, "zstd": _unzstd}


def decode_body(data: bytes, encodings: list[str], limit: int) -> bytes:
    """Undo the codings in reverse order of application, each capped at `limit` bytes of output."""
    for coding in reversed(encodings):
        data = DECODERS[coding](data, limit)
    return data


def parse_encodings(header: str | None) -> list[str]:
    if not header:
        return []
    codings = [part.strip().lower() for part in header.split(",") if part.strip()]
    codings = [coding for coding in codings if coding != "identity"]
    unknown = [coding for coding in codings if coding not in DECODERS]
    if unknown:
        raise HttpError(
            415,
            "unsupported_media_type",
            f"Content-Encoding {', '.join(unknown)} is not supported; use gzip or zstd",
        )
    return codings


class BodyDecoder:
    def __init__(self, app: ASGIApp, max_body_bytes: int, retry_after: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in {"POST", "PUT", "PATCH"}:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read(scope, receive)
        except OpenJevError as error:
            await error_response(error, self.retry_after)(scope, receive, send)
            return
        headers = [
            (name, value) for name, value in scope["headers"] if name not in (b"content-encoding", b"content-length")
        ]
        headers.append((b"content-length", str(len(body)).encode()))
        delivered = False

        async def decoded_receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": headers}, decoded_receive, send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        headers = Headers(scope=scope)
        limit = self.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit, "size declared in Content-Length")
        if headers.get("content-type", "").lower().startswith("multipart/form-data"):
            raise RequestRejected([ASSETS_REFUSED])
        encodings = parse_encodings(headers.get("content-encoding"))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _undecodable("the client disconnected while sending the body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit, "sent")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return decode_body(b"".join(chunks), encodings, limit)
