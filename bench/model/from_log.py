"""In-process figures from bench.py --verbose's log, for a run stopped before its end.

    python bench/model/from_log.py /tmp/bench.err

Uses the rounds the log has complete: per engine and batch size, best and median
sentences/s, per-round ratios to numpy, and FLOP utilization against the GEMM rate
the same round measured (and against the run's best GEMM rate).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import SHARE, sentences  # noqa: E402


def main() -> None:
    text = Path(sys.argv[1]).read_text(errors="replace")
    from tokenizers import Tokenizer

    from densewire._backends import BertModel, default_model_path

    folder = default_model_path()
    cfg = BertModel(folder)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(sentences())]
    flops = {b: sum(cfg.flops_per_token(n) * n for n in lengths[:SHARE[b]]) / SHARE[b] for b in SHARE}
    rounds = []
    for m in re.finditer(r"round (\d+)/\d+: (.*?); GEMM (\d+) GFLOP/s; load ([\d.]+)", text):
        per = {}
        for item in m.group(2).split(", "):
            name, rates = item.rsplit(" ", 1)
            per[name] = dict(zip((1, 8, 32), map(float, rates.split("/"))))
        rounds.append((per, float(m.group(3)) * 1e9, float(m.group(4))))
    # the round lines round to whole sentences/s: take the exact figures from the per-measurement lines
    exact = re.findall(r"^  (\S+) batch (\d+): ([\d.]+) sentences/s", text, re.M)
    names = list(rounds[0][0])
    per_round = len(names) * 3
    for r in range(len(rounds)):
        for name, b, rate in exact[r * per_round:(r + 1) * per_round]:
            rounds[r][0][name][int(b)] = float(rate)
    best_gemm = max(g for _, g, _ in rounds)
    print(f"{len(rounds)} complete rounds; GEMM per round (GFLOP/s): {[round(g / 1e9, 1) for _, g, _ in rounds]}; "
          f"load average per round: {[la for _, _, la in rounds]}; tokens/sentence "
          f"{min(lengths)}-{max(lengths)} (median {statistics.median(lengths)}); "
          f"FLOP/sentence at batch 32: {flops[32] / 1e6:.0f} M\n")
    print("| engine | batch | best | median | vs numpy per round (min / median / max) "
          "| FLOP util. vs same-round GEMM (median) | vs best GEMM (best) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        for b in (1, 8, 32):
            vals = [per[name][b] for per, _, _ in rounds]
            ratios = [per[name][b] / per["numpy"][b] for per, _, _ in rounds]
            util = [per[name][b] * flops[b] / g for per, g, _ in rounds]
            print(f"| {name} | {b} | {max(vals):.1f} | {statistics.median(vals):.1f} | "
                  f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f} | "
                  f"{100 * statistics.median(util):.0f} % | {100 * max(vals) * flops[b] / best_gemm:.0f} % |")


if __name__ == "__main__":
    main()
