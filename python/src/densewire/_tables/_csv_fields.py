"""How CSV spells a field (SPEC.md 15.4): RFC 4180 quoting, and a vector row as quoted pgvector text.

Used by the CSV codec and by the JSON codec's column tokens (which the CSV encoder shares).
"""

from __future__ import annotations

import re

import numpy as np
import orjson

__all__ = ["csv_field", "vector_field"]

_NEEDS_QUOTES = re.compile(r'[,"\r\n]|^[ \ufeff]| $')


def csv_field(s: str) -> str:
    """A field as RFC 4180 writes it: quoted when it contains ``,`` ``"`` CR or LF, is empty, or starts
    or ends with a space, or starts with U+FEFF (else read as a byte order mark); every ``"`` inside doubled."""
    if s == "" or _NEEDS_QUOTES.search(s):
        return '"' + s.replace('"', '""') + '"'
    return s


def vector_field(row: np.ndarray) -> bytes:
    """A float32[d] row as a quoted pgvector text, non-finite items spelled as CSV spells them."""
    items = []
    for x in row.tolist():
        items.append(orjson.dumps(np.float32(x), option=orjson.OPT_SERIALIZE_NUMPY) if np.isfinite(x)
                     else b"NaN" if x != x else b"Infinity" if x > 0 else b"-Infinity")
    return b'"[' + b",".join(items) + b']"'
