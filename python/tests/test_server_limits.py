"""limits.py: a long text is cut before tokenization to a prefix the model embeds exactly as the whole
text (checked token by token with the built-in model's tokenizer), and a real server answers 12 MB
texts with truthful usage, refuses them with 400 unless asked to truncate, and stays small doing so."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from densewire._backends.registry import load_backend
from densewire._server.limits import char_bound, clip_text, release_memory
from server_support import ServerProcess


@pytest.fixture(scope="module")
def minilm():
    return load_backend("minilm")


def _words(n: int, seed: int, vocab: list[str]) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(vocab) for _ in range(n))


def test_the_bound_comes_from_the_longest_wordpiece(minilm) -> None:
    longest = max(len(k.removeprefix("##")) for k in minilm._counter.get_vocab())
    assert minilm.max_chars_per_token == longest + 1
    assert char_bound(minilm) == minilm.max_tokens * (longest + 1)


def test_the_cut_text_gives_the_model_the_same_tokens(minilm) -> None:
    vocab = sorted(k for k in minilm._counter.get_vocab() if k.isalpha())
    longest = max(vocab, key=len)
    bound = char_bound(minilm)
    cases = {
        "ordinary": _words(100_000, 1, vocab),
        "longest pieces": " ".join([longest] * 20_000),
        "whitespace runs": ("word" + " " * 3000) * 300,
        "unknown long words": ("a" * 150 + " ") * 2000,
        "one long word": "x" * 50_000,
        "no spaces, punctuation": "ab,cd." * 20_000,
        "mixed scripts": "héllo wörld, 你好世界! " * 5000,
        "just over the limit": " ".join(["hello"] * (minilm.max_tokens - 1)) + " " * bound,
    }
    for name, text in cases.items():
        cut = clip_text(text, bound, minilm.max_tokens, minilm.count_tokens)
        assert minilm.tokenize([cut]) == minilm.tokenize([text]), name
        full = minilm.count_tokens([text])[0]
        kept = minilm.count_tokens([cut])[0]
        assert min(kept, minilm.max_tokens) == min(full, minilm.max_tokens), name
    assert len(clip_text(cases["ordinary"], bound, minilm.max_tokens, minilm.count_tokens)) <= bound


def test_a_text_within_the_limit_is_never_cut(minilm) -> None:
    bound = char_bound(minilm)
    text = " ".join(["supercalifragilistic"] * 40) + " " * (3 * bound) + "end"
    assert minilm.count_tokens([text])[0] <= minilm.max_tokens
    cut = clip_text(text, bound, minilm.max_tokens, minilm.count_tokens)
    assert minilm.tokenize([cut]) == minilm.tokenize([text]) and cut.endswith("end")


def test_release_memory_on_glibc() -> None:
    glibc = Path("/lib/x86_64-linux-gnu/libc.so.6").exists() or Path("/lib/aarch64-linux-gnu/libc.so.6").exists()
    assert release_memory() is glibc


def _status(server: ServerProcess, field: str) -> int:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _reset_peak(server: ServerProcess) -> None:
    """VmHWM (peak resident memory) starts again from the current resident memory."""
    assert server.proc is not None
    Path(f"/proc/{server.proc.pid}/clear_refs").write_text("5")


def test_12_mb_texts_are_embedded_in_bounded_memory_with_truthful_usage(minilm) -> None:
    vocab = sorted(k for k in minilm._counter.get_vocab() if k.isalpha())
    texts = [_words(1_600_000, seed, vocab)[: 12_000_000] for seed in (1, 2, 3)]
    with ServerProcess("--max-body-bytes", "16M", "--cache-bytes", "0", "--auto-truncate") as server, \
            httpx.Client(timeout=300) as client:
        client.post(server.url + "/v1/embeddings", json={"input": "warm up"}).raise_for_status()
        _reset_peak(server)
        before = _status(server, "VmRSS")
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda t: client.post(server.url + "/v1/embeddings", json={"input": t}), texts))
        grown = _status(server, "VmHWM") - before  # at the peak, while the three were being served
        for r in answers:
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["prompt_tokens"] == minilm.max_tokens  # what the model read
            assert r.headers["Densewire-Truncated"] == "1" and r.json()["truncated"] == [0]  # and it says so
        assert grown < 300 << 20, f"resident memory peaked {grown >> 20} MiB above where it was"

        r = client.post(server.url + "/v1/embeddings", json={"input": ["short", texts[0]], "truncate": False})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["param"] == "input[1]" and "more than" in err["message"]
        assert f"maximum context length is {minilm.max_tokens} tokens" in err["message"]
