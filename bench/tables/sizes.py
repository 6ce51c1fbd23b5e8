"""Compressed sizes of every body in a folder: raw, gzip -6 and -9, brotli 11, zstd 19.

    .venv/bin/python bench/tables/sizes.py DIR   -> JSON {path: {raw, gzip6, gzip9, br11, zstd19}}

for every body listed in DIR/bodies.json (key -> path relative to DIR).

gzip is zlib's deflate at that level in a gzip wrapper (what `gzip -6` / `gzip -9` and web servers
write: mtime 0, no name); brotli is Google's brotli at quality 11 (window 22); zstd is the zstandard
library at level 19. Node 20's zlib has no zstd, so all sizes come from here, one place.

brotli 11 and zstd 19 take minutes on the JSON bodies of a shared 2-core machine, so sizes are cached
by the SHA-256 of the body in ~/.cache/densewire-bench-tables/sizes.json (DENSEWIRE_BENCH_CACHE to
move it; delete it to recompute): the same bytes always compress to the same size.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import json
import sys
from pathlib import Path

import brotli
import zstandard


def sizes(body: bytes) -> dict[str, int]:
    return {
        "raw": len(body),
        "gzip6": len(gzip.compress(body, compresslevel=6, mtime=0)),
        "gzip9": len(gzip.compress(body, compresslevel=9, mtime=0)),
        "br11": len(brotli.compress(body, quality=11)),
        "zstd19": len(zstandard.ZstdCompressor(level=19).compress(body)),
    }


def main() -> None:
    d = Path(sys.argv[1])
    cache_file = Path(os.environ.get("DENSEWIRE_BENCH_CACHE", Path.home() / ".cache" / "densewire-bench-tables")) / "sizes.json"
    cache: dict[str, dict[str, int]] = json.loads(cache_file.read_text()) if cache_file.is_file() else {}
    out: dict[str, dict[str, int]] = {}
    for rel in sorted(set(json.loads((d / "bodies.json").read_text()).values())):
        body = (d / rel).read_bytes()
        key = hashlib.sha256(body).hexdigest()
        if key not in cache:
            print(f"sizes: compressing {rel} ({len(body):,} bytes)", file=sys.stderr)
            cache[key] = sizes(body)
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            cache_file.write_text(json.dumps(cache))
        out[rel] = cache[key]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
