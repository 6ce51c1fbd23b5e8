#!/usr/bin/env python3
"""Regenerate the Python code of the gRPC protos densewire serves (proto/inference/grpc_service.proto,
proto/tei/v1/tei.proto) into python/src/densewire/_server/grpcpb/, with grpcio-tools' protoc (pinned in
python/requirements-dev.txt), or, with ``--check``, fail (exit 1) when what is committed there differs
from what protoc makes now (scripts/test.sh runs the check; python/tests/test_grpc_generate_check.py
tests it).

    .venv/bin/python proto/generate.py          # write
    .venv/bin/python proto/generate.py --check  # compare only

Only the messages (``*_pb2.py``): the server registers its methods itself (grpc_kserve.py, grpc_tei.py,
which parse requests from bytes to name the size limit), and clients bring their own stubs. One rewrite
of protoc's output: the messages are added to densewire's own descriptor pool (``grpcpb.POOL``) instead of
protobuf's default pool, so that a process that also imports another copy of the same protocol
(tritonclient's ``service_pb2`` defines ``inference.*`` too, a client generated from TEI's tei.proto
``tei.v1.*``) does not fail with "duplicate symbol".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROTO = REPO / "proto"
OUT = REPO / "python" / "src" / "densewire" / "_server" / "grpcpb"
#: the protos served over gRPC, relative to proto/
SOURCES = ("inference/grpc_service.proto", "tei/v1/tei.proto")
HEADER = "# Regenerate with `.venv/bin/python proto/generate.py` (from {source}); CI fails when stale.\n"


def generate() -> dict[str, str]:
    """File name -> text of every generated module."""
    from grpc_tools import protoc

    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for source in SOURCES:
            status = protoc.main(["protoc", f"-I{PROTO}", f"--python_out={tmp}", str(PROTO / source)])
            if status != 0:
                raise SystemExit(f"protoc failed on proto/{source} (status {status})")
            stem = Path(source).with_suffix("")
            package = ".".join(stem.parent.parts)
            text = _own_pool((Path(tmp) / f"{stem}_pb2.py").read_text(), source)
            out[f"{stem.name}_pb2.py"] = HEADER.format(source=f"proto/{source}") + text
    return out


def _own_pool(text: str, source: str) -> str:
    default = "DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile("
    if text.count(default) != 1 or "# @@protoc_insertion_point(imports)\n" not in text:
        raise SystemExit(f"protoc's output for proto/{source} no longer has the lines proto/generate.py rewrites")
    text = text.replace(default, "DESCRIPTOR = POOL.AddSerializedFile(")
    return text.replace("# @@protoc_insertion_point(imports)\n",
                        "# @@protoc_insertion_point(imports)\nfrom . import POOL  # densewire's pool, not the default\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the committed code is stale")
    args = parser.parse_args(argv)
    wanted = generate()
    if args.check:
        stale = [name for name, text in wanted.items()
                 if not (OUT / name).is_file() or (OUT / name).read_text() != text]
        extra = sorted(p.name for p in OUT.glob("*_pb2*.py") if p.name not in wanted)  # no longer generated
        if stale or extra:
            print("python/src/densewire/_server/grpcpb/ is stale: run .venv/bin/python proto/generate.py "
                  f"(differs: {', '.join(stale) or 'none'}; not generated: {', '.join(extra) or 'none'})",
                  file=sys.stderr)
            return 1
        print(f"grpcpb: {len(wanted)} modules up to date")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (OUT / name).write_text(text)
    for p in OUT.glob("*_pb2*.py"):
        if p.name not in wanted:
            p.unlink()
    print(f"wrote {len(wanted)} modules to {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
