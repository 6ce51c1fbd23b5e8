"""Content codings the client can read: gzip and deflate always, br with ``brotli``, zstd with
``zstandard`` (or Python 3.14's ``compression.zstd``); inflating is bounded by ``max_body``."""

from __future__ import annotations

import zlib

from .._errors import DensewireError, MalformedError, PayloadTooLargeError, UnsupportedMediaTypeError

__all__ = ["available_codings", "decompress"]


try:  # optional: br answers need brotli
    import brotli
except ImportError:
    brotli = None
try:  # optional: zstd answers need zstandard, or Python 3.14's compression.zstd
    import zstandard as zstd
except ImportError:
    try:
        from compression import zstd as zstd  # type: ignore[import-not-found, no-redef]
    except ImportError:
        zstd = None


def available_codings() -> list[str]:
    """The codings this install decodes, best first (what an ``Accept-Encoding`` may ask for)."""
    return [c for c, ok in (("zstd", zstd is not None), ("br", brotli is not None), ("gzip", True)) if ok]


def _bounded(chunks, max_body: int, coding: str) -> bytearray:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > max_body:
            raise PayloadTooLargeError(f"the {coding} response inflates past the limit of {max_body} bytes",
                                       field="Content-Encoding")
    return out


def decompress(coding: str, body, max_body: int) -> bytearray:
    """The body decoded from ``coding`` (one coding; ``identity`` is not passed here)."""
    coding = coding.strip().lower()
    try:
        if coding in ("gzip", "x-gzip", "deflate"):
            d = zlib.decompressobj(zlib.MAX_WBITS | 32 if coding != "deflate" else zlib.MAX_WBITS)
            out = _bounded(_zlib_chunks(d, body, max_body), max_body, coding)
            if not d.eof:
                raise MalformedError(f"the {coding} response is truncated", field="Content-Encoding")
            return out
        if coding == "br" and brotli is not None:
            d = brotli.Decompressor()
            return _bounded((d.process(bytes(body[i:i + (1 << 20)])) for i in range(0, len(body), 1 << 20)),
                            max_body, coding)
        if coding == "zstd" and zstd is not None:
            if hasattr(zstd, "ZstdDecompressor") and hasattr(zstd.ZstdDecompressor(), "stream_reader"):
                reader = zstd.ZstdDecompressor().stream_reader(bytes(body), read_across_frames=True)
                return _bounded(iter(lambda: reader.read(1 << 20), b""), max_body, coding)
            return _bounded([zstd.decompress(bytes(body))], max_body, coding)
    except DensewireError:
        raise
    except (zlib.error, ValueError, OSError) as exc:
        raise MalformedError(f"the {coding} response is corrupt: {exc}", field="Content-Encoding") from exc
    except Exception as exc:  # brotli.error and zstd.ZstdError share no base class with the above
        if type(exc).__name__ in ("error", "Error", "ZstdError"):
            raise MalformedError(f"the {coding} response is corrupt: {exc}", field="Content-Encoding") from exc
        raise
    raise UnsupportedMediaTypeError(
        f"the response has Content-Encoding {coding!r}, which this install cannot decode"
        + (" (pip install brotli)" if coding == "br" else " (pip install zstandard)" if coding == "zstd" else ""),
        field="Content-Encoding")


def _zlib_chunks(d, body, max_body: int):
    data = memoryview(body)
    yield d.decompress(data, max_body + 1)
    while d.unconsumed_tail and not d.eof:
        yield d.decompress(d.unconsumed_tail, max_body + 1)
