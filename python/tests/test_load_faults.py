"""The short version of bench/load/load.py (issue 14, step 6): each scenario run briefly against real
server processes and a real redis-server on loopback, asserting what must hold whatever the machine's
speed (statuses, losses, memory), never a duration. The figures are in bench/load/RESULTS.md."""

from __future__ import annotations

import argparse
import importlib.util

from server_support import REPO, ensure_services

_spec = importlib.util.spec_from_file_location("densewire_bench_load", REPO / "bench" / "load" / "load.py")
assert _spec is not None and _spec.loader is not None
load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(load)

ARGS = argparse.Namespace(src=str(REPO / "python" / "src"), quick=True, admission=True, limit=4)


def test_steady_load_has_no_errors() -> None:
    out = load.steady(ARGS)
    assert out["requests"] > 0 and out["errors"] == 0, out


def test_ten_times_the_admission_limit_gets_only_200_and_429() -> None:
    out = load.overload(ARGS)
    assert set(out["loaded"]["statuses"]) <= {"200", "429"}, out
    assert out["loaded"]["statuses"].get("200", 0) > 0


def test_redis_killed_and_restarted_mid_load_fails_nothing_and_is_used_again() -> None:
    ensure_services()
    out = load.redis_restart(ARGS)
    assert out["failed"] == 0, out
    assert out["redis_keys_written_after_restart"] > 0 and out["redis_up_gauge"] == 1.0, out


def test_sigterm_mid_load_loses_no_admitted_request() -> None:
    out = load.sigterm(ARGS)
    assert out["admitted_lost"] == 0, out
    assert out["answered_200_after_sigterm"] > 0 or out["statuses"].get("200", 0) > 0, out


def test_decompression_bombs_and_oversized_bodies_are_refused_within_the_limit() -> None:
    out = load.bombs(ARGS)
    limit_mib = out["limit_bytes"] / (1 << 20)
    for name in ("gzip", "zstd", "br", "deflate", "identity-17MiB"):
        case = out[name]
        # every request coding is decoded a block at a time up to the limit, then refused (413)
        assert case["status"] == 413, out
        assert case["peak_rss_growth_mib"] < 2 * limit_mib + 16, out


def test_large_texts_at_once_stay_within_300_mib() -> None:
    out = load.bigtexts(ARGS)
    assert out["statuses"] == {"200": 3}, out
    assert out["peak_rss_growth_mib"] < 300, out


def test_slow_header_clients_do_not_stop_others() -> None:
    out = load.slowloris(ARGS)
    served = out["with_100_slow_clients"]
    assert served["statuses"].get("200", 0) > 0 and set(served["statuses"]) == {"200"}, out
