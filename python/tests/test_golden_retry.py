"""Every golden case of testdata/golden/retry.json (SPEC.md section 18), one test per case id: the
wait before a retry, or giving up, from the failed answer's status and Retry-After, the retry number,
the policy and the random draw (injected as ``RetryPolicy.random``), through ``RetryPolicy.wait``,
the function the client's retry loop calls; waits compared bit for bit."""

from __future__ import annotations

import json
import struct

import pytest

from densewire._client import RetryPolicy
from densewire._client._retry import MAX_RETRY_AFTER, parse_retry_after
from golden_capabilities import GOLDEN, claimed_cases

_CLAIMED = claimed_cases({"retry.json": json.loads((GOLDEN / "retry.json").read_text())["cases"]})


def _f64(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


def _bits(x: float) -> str:
    return struct.pack(">d", x).hex()


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in _CLAIMED])
def test_retry_schedule(case: dict) -> None:
    draw = _f64(case["draw_bits"])
    assert repr(draw) == case["draw"]
    policy = RetryPolicy(case["max_retries"], _f64(case["base_bits"]), _f64(case["cap_bits"]), random=lambda: draw)
    wait = policy.wait(case["retry"], status=case["status"], retry_after=case.get("retry_after"), now=case["now"])
    if "wait" in case:
        assert wait is not None, f"gave up, the spec waits {case['wait']} s"
        assert _bits(wait) == case["wait_bits"], f"waits {wait!r}, the spec {case['wait']}"
        return
    assert wait is None, f"waits {wait!r} s, the spec gives up ({case['give_up']})"
    if case["give_up"] == "retry_after_too_long":  # the value the 429/503 error carries
        seconds = parse_retry_after(case["retry_after"], now=case["now"])
        assert seconds is not None and seconds > MAX_RETRY_AFTER and repr(seconds) == case["retry_after_seconds"]
