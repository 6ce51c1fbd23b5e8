"""Bounded memory per request: texts cut to what the model can read before tokenization, and large
transient buffers given back to the system after a request.

**The cut.** A model reads at most ``max_tokens`` tokens of a text; tokenizing all of a 12 MB text to
find that out costs gigabytes (the tokenizer keeps offsets and alignments per character). A backend
that declares ``max_chars_per_token`` (the most characters one token covers, plus the separator
before it) gets ``bound = max_tokens x max_chars_per_token`` characters. A text longer than that is
cut at the last whitespace at or before the bound, and the piece is tokenized: when it already holds
more than ``max_tokens`` tokens, the model reads the same tokens from it as from the whole text (the
tokens of a prefix cut at whitespace are a prefix of the text's tokens, for the whitespace-splitting
tokenizers that declare the attribute), so the piece is embedded instead, and its count, above the
limit, is as truthful for ``usage`` (``max_tokens`` embedded) and for ``truncate: false`` (refused).
Otherwise the text has fewer tokens than characters suggest (long runs of whitespace, words the
tokenizer maps to one unknown token): the next pieces are counted one by one, each at most ``bound``
characters, until the limit is passed or the text ends, and pieces without any token are dropped.
So no text is ever cut before its ``max_tokens``-th token, and the tokenizer never sees more than
``bound`` characters at once.

For all-MiniLM-L6-v2: ``max_tokens`` 256, the longest WordPiece of the vocabulary 18 characters, so
``max_chars_per_token`` 19 and the bound 4,864 characters (a token of ordinary text covers ~4).

**Worst-case memory** of one request, from the limits: the body (``--max-body-bytes``, 16 MiB, as read
and as decompressed: at most 2 x 16 MiB while inflating), its parsed texts (at most 4 bytes per
character for Python str: 64 MiB for a 16 MiB body of non-Latin text), the clipped copies (at most
``--max-client-batch-size`` x bound characters x 4 bytes: 2048 x 4,864 x 4 = 40 MiB), the model's
activations for one call of ``--max-batch-tokens`` (shared by all requests, not per request) and the
response (inputs x dimensions x 4 bytes, and its encoding: 2048 x 384 x 4 = 3 MiB as raw, ~4x that as
JSON numbers). About 140 MiB for the largest request; a full queue holds
``--max-concurrent-requests`` of them at most (64 x 140 MiB, ~9 GiB, only if every request is a
16 MiB body of 4-byte characters; 64 requests of 2048 ordinary texts of 200 characters are ~1 GiB).
Lower ``--max-body-bytes`` or ``--max-concurrent-requests`` to bound it further.

**Giving memory back.** glibc keeps freed memory in its arenas; after a request whose body or
response was large, ``malloc_trim(0)`` returns it to the system (in the background, after the
response is sent).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Sequence

from densewire import InvalidFieldError

__all__ = ["char_bound", "clip_text", "release_memory", "too_long", "TRIM_AFTER_BYTES"]

#: A request whose body or response reaches this size is followed by ``malloc_trim``.
TRIM_AFTER_BYTES = 1 << 20
#: How far back from the bound a whitespace to cut at is looked for.
_WHITESPACE_LOOKBACK = 1024


def char_bound(backend: object) -> int | None:
    """``max_tokens x max_chars_per_token`` of a backend that declares the latter, else None."""
    per_token = getattr(backend, "max_chars_per_token", None)
    max_tokens = getattr(backend, "max_tokens", None)
    if not isinstance(per_token, int) or not isinstance(max_tokens, int) or per_token <= 0 or max_tokens <= 0:
        return None
    return per_token * max_tokens


def _cut(text: str, start: int, stop: int) -> int:
    """An index in (start, stop]: just after the last whitespace before ``stop`` (looking back at most
    ``_WHITESPACE_LOOKBACK`` characters), else ``stop`` itself."""
    if stop >= len(text):
        return len(text)
    for i in range(stop - 1, max(start, stop - _WHITESPACE_LOOKBACK) - 1, -1):
        if text[i].isspace():
            return i + 1 if i + 1 > start else stop
    return stop


def clip_text(text: str, bound: int, max_tokens: int, count_tokens: Callable[[Sequence[str]], list[int]]) -> str:
    """``text``, or a shorter text the model embeds exactly as ``text`` (see the module doc)."""
    if len(text) <= bound:
        return text
    end = _cut(text, 0, bound)
    pieces = [text[:end]]
    total = count_tokens(pieces)[0]
    if total > max_tokens:
        return pieces[0]
    special = count_tokens([""])[0]  # [CLS] and [SEP] for BERT; counted once per text
    while end < len(text) and total <= max_tokens:
        nxt = _cut(text, end, end + bound)
        piece = text[end:nxt]
        n = count_tokens([piece])[0] - special
        if n > 0:
            pieces.append(piece)
            total += n
        elif piece and not pieces[-1][-1:].isspace():
            pieces.append(" ")  # keep the words on either side of a dropped piece apart
        end = nxt
    return "".join(pieces)


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim  # glibc only (musl and macOS have none)
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_TRIM = _malloc_trim()


def release_memory() -> bool:
    """Give freed heap memory back to the system (glibc's ``malloc_trim(0)``); False where unavailable."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def too_long(index: int, count: int, limit: int, *, clipped: bool = False, field: str = "input",
             hint: str = "shorten it (split long documents into chunks), send truncate_prompt_tokens: -1 "
                         "(or truncate: true) to embed its first tokens, or run the server with --auto-truncate"
             ) -> InvalidFieldError:
    """The error of an input longer than the model reads (no silent truncation, issue 27): it names the
    input (``field[index]``), its token count and the limit, with OpenAI's "maximum context length"
    phrasing. ``clipped``: the count is of a prefix already over the limit (limits.py), so "more than".
    The numbers are kept on the error (``too_long``) for the routes that phrase it as their server does."""
    many = f"more than {count}" if clipped else str(count)
    err = InvalidFieldError(f"this model's maximum context length is {limit} tokens, however you requested "
                            f"{many} tokens in this input; {hint}", field=f"{field}[{index}]")
    err.too_long = (index, count, limit, clipped)  # type: ignore[attr-defined]
    return err
