#!/usr/bin/env python3
"""Make the calibration set of quantized answers (SPEC.md section 17.2) from the Python documentation.

    python3 scripts/calibration_set.py OUT.txt     # with CPython 3.11.7: the shipped python-docs-v1.txt

The set ships as python/src/densewire/_server/calibration/python-docs-v1.txt and is never remade by a
build: its sha256 is part of the spec and of every server's quantization cache key. This script
documents how it was made, and makes it again byte for byte on CPython 3.11.7 (other versions have
other documentation, so other sentences): 500 sentences of the Language Reference as pydoc ships it
(pydoc_data/topics.py) and 500 first sentences of docstrings of the standard library's top-level
modules (Lib/*.py), each 6 to 30 words, ASCII, ending in . ! or ?, without code-like characters,
deduplicated (case-insensitively), then taken evenly spaced in their order (topics by name; files by
name, docstrings in ast.walk order). The text is the PSF's, under the PSF License Version 2
(python-docs-v1.LICENSE beside the set).
"""

from __future__ import annotations

import ast
import hashlib
import pathlib
import re
import sys
import sysconfig

import pydoc_data.topics

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
CODE_LIKE = re.compile(r"[{}\[\]<>=|\\_*`#@$^~]|\.\.\.|>>>|::|\b(?:def|lambda|self)\b")


def usable(sentence: str) -> bool:
    words = sentence.split()
    return (6 <= len(words) <= 30 and sentence[0].isupper() and sentence[-1] in ".!?"
            and not CODE_LIKE.search(sentence) and sentence.isascii() and len(sentence) <= 220)


def deduplicated(sentences: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for s in sentences:
        seen.setdefault(s.lower(), s)
    return list(seen.values())


def evenly(items: list[str], k: int) -> list[str]:
    return [items[int(i * len(items) / k)] for i in range(k)]


def reference_sentences() -> list[str]:
    out = []
    for key in sorted(pydoc_data.topics.topics):
        for para in re.split(r"\n\s*\n", pydoc_data.topics.topics[key]):
            if para.startswith((" ", "\t")):  # examples and grammar are indented
                continue
            out += [s for s in SENTENCE_END.split(" ".join(para.split())) if usable(s)]
    return deduplicated(out)


def docstring_sentences() -> list[str]:
    out = []
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                doc = ast.get_docstring(node)
                if doc:
                    first = SENTENCE_END.split(" ".join(re.split(r"\n\s*\n", doc)[0].split()))[0]
                    if usable(first):
                        out.append(first)
    return deduplicated(out)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    texts = evenly(reference_sentences(), 500) + evenly(docstring_sentences(), 500)
    assert len(set(texts)) == 1000
    data = ("\n".join(texts) + "\n").encode("utf-8")
    pathlib.Path(sys.argv[1]).write_bytes(data)
    print(f"{sys.argv[1]}: {len(texts)} texts, {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
