"""bench/load/results.jsonl (from run.sh) as the before/after table of RESULTS.md:

    .venv/bin/python bench/load/table.py bench/load/results.jsonl
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

CMD = "SCENARIOS={} bash bench/load/run.sh /tmp/rel-before/python/src"


def _statuses(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items())


def _bombs(r: dict[str, Any]) -> str:
    parts = []
    for name in ("gzip", "zstd", "br", "deflate", "identity-17MiB"):
        c = r.get(name)
        if c:
            parts.append(f"{name}: {c['status']}, +{c['peak_rss_growth_mib']} MiB")
    return "; ".join(parts)


ROWS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "steady": ("60 s at 64 connections, one new text a request (built-in model): errors",
               lambda r: f"{r['errors']} errors of {r['requests']} (p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms)"),
    "overload": ("10x capacity (40 connections, admission 4): statuses; p99 of 200s vs one client alone",
                 lambda r: f"{_statuses(r['loaded']['statuses'])}; p99 {r['loaded']['p99_ms']} ms vs "
                           f"{r['unloaded']['p99_ms']} ms = {r.get('p99_ratio')}x"),
    "redis": ("Redis SIGKILLed at 1/4, restarted at 1/2 of 20 s at 16 connections: failed; Redis used again",
              lambda r: f"{r['failed']} failed of {r['requests']}; {r['redis_keys_written_after_restart']} keys "
                        f"written after the restart, densewire_redis_up {r['redis_up_gauge']}"),
    "sigterm": ("SIGTERM after 10 s at 32 connections: admitted requests lost",
                lambda r: f"{r['admitted_lost']} lost (server answered {r['server_responses']}, client got "
                          f"{r['client_responses']}; {r['answered_200_after_sigterm']} answered 200 after SIGTERM; "
                          f"statuses {_statuses(r['statuses'])})"),
    "bombs": ("1 GiB of zeros compressed, and a 17 MiB body, limit 16 MiB: status, peak RSS growth",
              _bombs),
    "bigtexts": ("three different 12 MB texts at once (built-in model): status, peak RSS growth",
                 lambda r: f"{_statuses(r['statuses'])}; +{r['peak_rss_growth_mib']} MiB peak "
                           f"(RSS {r['rss_before_mib']} -> {r['rss_after_mib']} MiB after); p99 {r['p99_ms']} ms"),
    "slowloris": ("100 slow-header clients while 4 clients send requests: their answers",
                  lambda r: f"{_statuses(r['with_100_slow_clients']['statuses'])} (p50 "
                            f"{r['with_100_slow_clients']['p50_ms']} ms; without them "
                            f"{_statuses(r['baseline']['statuses'])}, p50 {r['baseline']['p50_ms']} ms)"),
}


def main(path: str) -> None:
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            results[(r["scenario"], r["side"])] = r
    print("| figure | before | after | command |")
    print("|---|---|---|---|")
    for name, (what, fmt) in ROWS.items():
        cells = []
        for side in ("before", "after"):
            r = results.get((name, side))
            if r is None:
                cells.append("not run")
            elif "error" in r:
                cells.append(r["error"])
            else:
                try:
                    cells.append(fmt(r))
                except KeyError as exc:
                    cells.append(f"(missing {exc})")
        print(f"| {what} | {cells[0]} | {cells[1]} | `{CMD.format(name)}` |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/load/results.jsonl")
