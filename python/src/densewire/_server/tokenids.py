"""Token-id input of ``/v1/embeddings`` read as OpenAI's ``cl100k_base`` ids (``--token-ids cl100k_base``).

LangChain's ``OpenAIEmbeddings`` (with its default ``check_embedding_ctx_length=True``) tokenizes every
text with tiktoken's ``cl100k_base`` and sends the ids, not the text. Read as the served model's own ids
they mean nothing; this module turns them back into the text: each id's bytes from OpenAI's published
vocabulary (``cl100k_base.tiktoken``: one ``BASE64(token bytes) rank`` a line, shipped in
``_server/data/`` and checked against tiktoken's sha256 when loaded), concatenated, decoded as UTF-8
(invalid sequences replaced, as tiktoken's ``decode`` does). The text is then embedded like any other,
with the model's own tokenizer. No tiktoken runtime is needed.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from pathlib import Path

from densewire import InvalidFieldError

__all__ = ["CL100K_SHA256", "CL100K_PATH", "CL100K_TOKENS", "Cl100kVocabulary", "cl100k", "cl100k_loaded", "reject_token_ids"]

#: sha256 of cl100k_base.tiktoken as tiktoken's tiktoken_ext/openai_public.py expects it
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PATH = Path(__file__).parent / "data" / "cl100k_base.tiktoken"
#: cl100k_base's ordinary tokens are ids 0-100255; its special tokens (100257 <|endoftext|> ...) are not
#: text: tiktoken's encode refuses to produce them by default (LangChain never sends them), so they are
#: refused here like every id outside the vocabulary
CL100K_TOKENS = 100256


class Cl100kVocabulary:
    """The ranks of cl100k_base: id -> token bytes."""

    def __init__(self, path: Path = CL100K_PATH, sha256: str = CL100K_SHA256) -> None:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise RuntimeError(f"{path} has sha256 {digest}, not cl100k_base's {sha256}: reinstall densewire")
        pieces: dict[int, bytes] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                pieces[int(rank)] = base64.b64decode(token)
        self.size = max(pieces) + 1
        if self.size != CL100K_TOKENS or len(pieces) != CL100K_TOKENS:
            raise RuntimeError(f"{path} holds {len(pieces)} tokens, not cl100k_base's {CL100K_TOKENS}")
        self._pieces: list[bytes] = [pieces[i] for i in range(self.size)]

    def decode(self, ids: list[int], field: str) -> str:
        """The text of one sequence; an id with no token is an ``InvalidFieldError`` at ``field[j]``."""
        pieces = self._pieces
        out = []
        for j, tok in enumerate(ids):
            if not 0 <= tok < self.size:
                raise InvalidFieldError(
                    f"{tok} is not a token id of cl100k_base (OpenAI's vocabulary: ids 0-{self.size - 1}; its special "
                    f"tokens are not text), which this server reads token ids as (--token-ids cl100k_base)",
                    field=f"{field}[{j}]")
            out.append(pieces[tok])
        return b"".join(out).decode("utf-8", errors="replace")

    def decode_all(self, seqs: list[list[int]], fields: list[str]) -> list[str]:
        return [self.decode(s, f) for s, f in zip(seqs, fields)]


_lock = threading.Lock()
_vocabulary: Cl100kVocabulary | None = None


def cl100k() -> Cl100kVocabulary:
    """The vocabulary, loaded once (about 0.2 s) on first use."""
    global _vocabulary
    with _lock:
        if _vocabulary is None:
            _vocabulary = Cl100kVocabulary()
        return _vocabulary


def cl100k_loaded() -> bool:
    return _vocabulary is not None


def reject_token_ids() -> InvalidFieldError:
    """The error (400 on /v1/embeddings) of ``--token-ids reject``."""
    return InvalidFieldError(
        "this server does not read token ids (--token-ids reject): send the texts as strings. LangChain's "
        "OpenAIEmbeddings sends tiktoken cl100k_base ids unless it is built with check_embedding_ctx_length=False",
        field="input")
