"""Issue 19.5 on the real thing: the 'st:' backend's count_tokens and embed on two threads at once.

    bench/model/.venv/bin/python bench/model/st_race.py [--seconds 15]

Runs densewire's SentenceTransformerBackend (sentence-transformers + torch, the bench venv) twice
on the built-in model: first with count_tokens sharing the model's own tokenizer (the old code),
then as shipped (a tokenizer per use). Each run: one thread embeds batches of texts of mixed
lengths, another counts tokens, for the given time; prints the errors each saw.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter

from densewire._backends import SentenceTransformerBackend, default_model_path


def hammer(backend: SentenceTransformerBackend, seconds: float) -> Counter:
    texts = [("word " * n).strip() for n in range(1, 60)]
    errors: Counter = Counter()
    done = {"embed": 0, "count": 0}
    stop = time.monotonic() + seconds

    def embed() -> None:
        while time.monotonic() < stop:
            try:
                backend.embed(texts[::3])
                done["embed"] += 1
            except Exception as exc:  # noqa: BLE001 (counted)
                errors[f"embed: {type(exc).__name__}: {str(exc)[:80]}"] += 1

    def count() -> None:
        while time.monotonic() < stop:
            try:
                backend.count_tokens(texts)
                done["count"] += 1
            except Exception as exc:  # noqa: BLE001
                errors[f"count: {type(exc).__name__}: {str(exc)[:80]}"] += 1

    threads = [threading.Thread(target=embed), threading.Thread(target=count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors["(calls: embed)"] = done["embed"]
    errors["(calls: count)"] = done["count"]
    return errors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15)
    args = ap.parse_args()
    sys.setswitchinterval(1e-5)  # switch threads often, as a busy server does
    backend = SentenceTransformerBackend(str(default_model_path()))
    shipped = backend._tokenizers

    class Shared:  # the old code: count_tokens used the model's own tokenizer
        def get(self) -> object:
            return backend._model.tokenizer

    backend._tokenizers = Shared()
    print("old (one shared tokenizer):", dict(hammer(backend, args.seconds)))
    backend._tokenizers = shipped
    print("new (a tokenizer per use): ", dict(hammer(backend, args.seconds)))


if __name__ == "__main__":
    main()
