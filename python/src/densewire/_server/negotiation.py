"""Content negotiation (SPEC.md section 12): ``Accept`` with q-values, the ``format`` override,
and ``Accept-Encoding`` for response compression.

Pure functions over header strings, so that any ASGI framework can use them.
"""

from __future__ import annotations

from typing import Callable

from densewire import (FORMATS, MEDIA_TYPES, TABLE_FORMATS, TABLE_MEDIA_TYPES, NotAcceptableError,
                       format_for_media_type)
from densewire._tables import table_format_for_media_type

__all__ = [
    "negotiate_format",
    "negotiate_table_format",
    "supported_table_media_types",
    "negotiate_encoding",
    "parse_accept",
    "ENCODINGS",
    "VARY",
    "supported_media_types",
]

#: Response codings in the server's order of preference (SPEC.md section 12).
ENCODINGS = ("zstd", "br", "gzip")
VARY = "Accept, Accept-Encoding"


def supported_media_types() -> list[str]:
    return [MEDIA_TYPES[f] for f in FORMATS]


def _parse_q(params: list[str]) -> float | None:
    """The q of a list of ``name=value`` parameters: 1.0 if absent, None if malformed."""
    for p in params:
        name, _, value = p.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return None
            if not 0.0 <= q <= 1.0 or value.strip().lower() in ("nan", "inf"):
                return None
            return q
    return 1.0


def parse_accept(header: str) -> list[tuple[str, str, float]]:
    """``[(type, subtype, q)]`` from an ``Accept`` value; malformed ranges are left out."""
    out: list[tuple[str, str, float]] = []
    for part in header.split(","):
        pieces = part.split(";")
        rng = pieces[0].strip().lower()
        if not rng:
            continue
        typ, slash, sub = rng.partition("/")
        if not slash or not typ or not sub:
            continue
        q = _parse_q(pieces[1:])
        if q is None:
            continue
        out.append((typ.strip(), sub.strip(), q))
    return out


def _q_for(fmt: str, ranges: list[tuple[str, str, float]], media_types: dict[str, str],
           format_of: Callable[[str], str | None]) -> float | None:
    """q-value given to ``fmt`` by the most specific matching range (None: no range matches)."""
    best_level, best_q = 0, None
    canonical_type = media_types[fmt].split("/", 1)[0]
    for typ, sub, q in ranges:
        if typ == "*" and sub == "*":
            level = 1
        elif sub == "*":
            level = 2 if typ == canonical_type else 0
        else:
            level = 3 if format_of(f"{typ}/{sub}") == fmt else 0
        if level == 0:
            continue
        if level > best_level:
            best_level, best_q = level, q
        elif level == best_level and best_q is not None and q > best_q:
            best_q = q
    return best_q


def _negotiate(accept: str | None, format_param: str | None, formats: tuple[str, ...] | list[str],
               media_types: dict[str, str], format_of: Callable[[str], str | None], what: str) -> str:
    """``format_param`` overrides ``Accept``; no ``Accept`` (or ``*/*``) means ``formats[0]``; the
    highest q wins, ``formats``' order among equals; ``NotAcceptableError`` (406) when nothing fits."""
    supported = ", ".join(media_types[f] for f in formats)
    if format_param is not None:
        fmt = format_param.strip().lower()
        if fmt in formats:
            return fmt
        raise NotAcceptableError(
            f"{format_param[:100]!r} is not {what}; use one of {', '.join(formats)} (media types: {supported})",
            field="format",
        )
    if accept is None or not accept.strip():
        return formats[0]
    ranges = parse_accept(accept)
    best_fmt, best_q = None, 0.0
    for fmt in formats:
        q = _q_for(fmt, ranges, media_types, format_of)
        if q is not None and q > best_q:
            best_fmt, best_q = fmt, q
    if best_fmt is None:
        raise NotAcceptableError(
            f"none of the media types in Accept ({accept.strip()[:200]}) can be served as {what}; "
            f"supported: {supported}",
            field="Accept",
        )
    return best_fmt


def negotiate_format(accept: str | None, format_param: str | None = None) -> str:
    """The response format for a request (SPEC.md section 12).

    ``format_param`` (the ``format`` query parameter) overrides ``Accept``; an unknown value is a
    ``NotAcceptableError`` (406) on the field ``format``.
    No ``Accept``, an empty one, or ``*/*`` means JSON. Among equal q-values the order of
    ``densewire.FORMATS`` decides. Raises ``NotAcceptableError`` when nothing fits.
    """
    return _negotiate(accept, format_param, FORMATS, MEDIA_TYPES, format_for_media_type, "a format")


def supported_table_media_types() -> list[str]:
    return [TABLE_MEDIA_TYPES[f] for f in TABLE_FORMATS]


def negotiate_table_format(accept: str | None, format_param: str | None = None) -> str:
    """The format of a ``GET /v1/tables/{name}`` response (SPEC.md 15.9), by the rules of
    :func:`negotiate_format` over the table formats (``json``, ``json-rows``, ``json-columns``,
    ``csv``, ``msgpack``, ``protobuf``, ``arrow``): no ``Accept`` or ``*/*`` means JSON objects."""
    return _negotiate(accept, format_param, TABLE_FORMATS, TABLE_MEDIA_TYPES, table_format_for_media_type,
                      "a table format")


def negotiate_encoding(accept_encoding: str | None) -> str | None:
    """The content coding for a response (``zstd``, ``br``, ``gzip``) or None for identity."""
    if not accept_encoding:
        return None
    qs: dict[str, float] = {}
    for part in accept_encoding.split(","):
        pieces = part.split(";")
        name = pieces[0].strip().lower()
        if not name:
            continue
        q = _parse_q(pieces[1:])
        if q is None:
            continue
        if name == "x-gzip":
            name = "gzip"
        qs[name] = max(q, qs.get(name, 0.0)) if name in qs else q
    star = qs.get("*")
    best, best_q = None, 0.0
    for enc in ENCODINGS:
        q = qs.get(enc, star)
        if q is not None and q > best_q:
            best, best_q = enc, q
    if best is None:
        return None
    identity_q = qs.get("identity")
    if identity_q is not None and identity_q > best_q:
        return None
    return best
