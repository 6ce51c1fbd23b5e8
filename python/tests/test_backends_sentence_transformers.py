"""Issue 19.5: the 'st:' backend's count_tokens and encode must not share a tokenizer.

A Hugging Face fast tokenizer's ``__call__`` first writes its truncation and
padding settings into the Rust ``tokenizers.Tokenizer`` it wraps, then encodes.
sentence-transformers and torch are not in the test environment (torch alone is
hundreds of MB), so the race is reproduced on the real ``tokenizers.Tokenizer``
with exactly that set-then-encode sequence; a barrier makes the interleaving
that production hit by chance (count_tokens landing between encode's settings
and its encoding) happen every time. bench/model/st_race.py runs the same
check on the real backend with sentence-transformers installed.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
from tokenizers import Tokenizer

from densewire._backends import default_model_path
from densewire._backends.sentence_transformers import PerThreadTokenizer

TEXTS = ["a short one", "a somewhat longer sentence with more words in it", "mid length text here"]


def hf_call(tok: Tokenizer, texts: list[str], *, padding: bool, truncation: bool,
            between: Callable[[], None] = lambda: None) -> list[list[int]]:
    """PreTrainedTokenizerFast.__call__: set_truncation_and_padding, then encode_batch, then tensors."""
    if truncation:
        tok.enable_truncation(max_length=256)
    else:
        tok.no_truncation()
    if padding:
        tok.enable_padding()
    else:
        tok.no_padding()
    between()
    ids = [e.ids for e in tok.encode_batch(texts)]
    if padding and len({len(i) for i in ids}) != 1:
        raise ValueError("Unable to create tensor, you should probably activate truncation and/or padding")
    return ids


def race(encode_tok: Tokenizer, count_tok: Callable[[], Any]) -> tuple[BaseException | None, list[int]]:
    """encode() sets its padding; count_tokens runs; encode() encodes. Returns encode's error and the counts."""
    settings_written, counted = threading.Event(), threading.Event()
    result: dict[str, Any] = {"error": None}

    def encode() -> None:
        def pause() -> None:
            settings_written.set()
            assert counted.wait(10)

        try:
            hf_call(encode_tok, TEXTS, padding=True, truncation=True, between=pause)
        except BaseException as exc:  # noqa: BLE001 (reported to the test)
            result["error"] = exc

    def count() -> None:
        assert settings_written.wait(10)
        try:
            result["counts"] = [len(i) for i in hf_call(count_tok(), TEXTS, padding=False, truncation=False)]
        finally:
            counted.set()

    threads = [threading.Thread(target=encode), threading.Thread(target=count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return result["error"], result["counts"]


@pytest.fixture
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))


def test_one_shared_tokenizer_fails(tokenizer: Tokenizer) -> None:
    error, _ = race(tokenizer, lambda: tokenizer)  # the old backend: count_tokens used the model's tokenizer
    assert isinstance(error, ValueError) and "Unable to create tensor" in str(error)


def test_a_tokenizer_per_use_does_not(tokenizer: Tokenizer) -> None:
    fresh = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    fresh.no_padding()
    fresh.no_truncation()
    want = [len(e.ids) for e in fresh.encode_batch(TEXTS)]
    own = PerThreadTokenizer(tokenizer)  # what the backend's count_tokens and embed_tokens use now
    error, counts = race(tokenizer, own.get)
    assert error is None
    assert counts == want and len(set(counts)) == 3


def test_each_thread_gets_its_own_copy(tokenizer: Tokenizer) -> None:
    own = PerThreadTokenizer(tokenizer)
    mine = own.get()
    assert own.get() is mine and mine is not tokenizer
    theirs: list[Any] = []
    t = threading.Thread(target=lambda: theirs.append(own.get()))
    t.start()
    t.join()
    assert theirs[0] is not mine and theirs[0] is not tokenizer
    mine.enable_truncation(max_length=3)
    assert len(theirs[0].encode(TEXTS[1]).ids) > 3 and len(tokenizer.encode(TEXTS[1]).ids) > 3
