"""The retry-schedule golden cases of SPEC.md section 18 (imported by generate.py).

The reference computes each wait twice: with Python floats (IEEE 754 binary64, round-to-nearest-even,
one operation at a time, as the spec orders them) and exactly with fractions, rounding once per
operation; the two must agree, and so must the expectation written in testdata/cases/retry.toml.
"""

from __future__ import annotations

import math
import struct
from email.utils import parsedate_to_datetime
from fractions import Fraction

RETRIED = frozenset({0, 429, 503})  # 0: a connection that failed before any byte of an answer
MAX_RETRY_AFTER = 60
DEFAULT_NOW = 1795608000  # Wed, 25 Nov 2026 12:00:00 GMT
DEFAULTS = {"status": 429, "max_retries": 2, "base": 0.5, "cap": 8.0, "now": DEFAULT_NOW}
GROUPS = ("backoff", "after_header", "after_date", "ignored", "give_up")


def bits(x: float) -> str:
    return struct.pack(">d", x).hex()


def round_binary64(q: Fraction) -> float:
    """The binary64 nearest to q, ties to even (float(Fraction) rounds correctly)."""
    return float(q)


def parse_retry_after(value: str | None, now: float) -> Fraction | None:
    """SPEC 18.2 step 2, exactly: delay-seconds, an IMF-fixdate relative to now, else absent."""
    if value is None:
        return None
    text = value.strip(" \t")
    if text and text.isascii() and text.isdigit():
        return Fraction(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None or not text[:3].isalpha():
        return None
    return max(Fraction(0), Fraction(int(when.timestamp())) - Fraction(now))


def schedule(c: dict) -> dict:
    """The outcome of one case: {"wait": float} or {"give_up": reason[, "retry_after_seconds": float]}."""
    if c["status"] not in RETRIED:
        return {"give_up": "not_retried"}
    if c["retry"] > c["max_retries"]:
        return {"give_up": "retries_spent"}
    ra = parse_retry_after(c.get("retry_after"), c["now"])
    if ra is not None and ra > MAX_RETRY_AFTER:
        return {"give_up": "retry_after_too_long", "retry_after_seconds": round_binary64(ra)}
    n, base, cap, draw = c["retry"], c["base"], c["cap"], c["draw"]
    # binary64, in the spec's order (min first when base * 2**(n-1) would overflow)
    try:
        product = math.ldexp(base, n - 1)  # base * 2**(n-1), exact: 0 stays 0 for any n
    except OverflowError:
        product = float("inf")
    bound = min(cap, product)
    jitter = draw * bound
    wait = jitter if ra is None else float(ra) + jitter
    # exactly, rounding once per operation
    xbound = min(Fraction(cap), Fraction(base) * 2 ** (n - 1))
    xjitter = round_binary64(Fraction(draw) * Fraction(round_binary64(xbound)))
    xwait = xjitter if ra is None else round_binary64(Fraction(round_binary64(ra)) + Fraction(xjitter))
    assert wait == xwait and bits(wait) == bits(xwait), (c, wait, xwait)
    return {"wait": wait}


def retry_cases(spec: dict) -> list[dict]:
    """retry.json: every case of testdata/cases/retry.toml with its checked outcome."""
    out = []
    for group in GROUPS:
        for raw in spec[group]:
            c = {**DEFAULTS, **raw}
            case_id = f"retry.{group}.{c['name']}"
            for key in ("base", "cap", "draw", "now"):
                c[key] = float(c[key])
            assert 0.0 <= c["draw"] < 1.0, f"{case_id}: the draw must be in [0, 1)"
            assert isinstance(c["retry"], int) and c["retry"] >= 1, f"{case_id}: retry counts from 1"
            got = schedule(c)
            if "wait" in got:
                assert "give_up" not in c and c.get("wait") == repr(got["wait"]), \
                    f"{case_id}: written {c.get('wait', c.get('give_up'))!r}, the reference waits {got['wait']!r}"
            else:
                assert c.get("give_up") == got["give_up"], \
                    f"{case_id}: written {c.get('give_up', c.get('wait'))!r}, the reference gives up {got['give_up']!r}"
                if "retry_after_seconds" in got:
                    assert c.get("retry_after_seconds") == repr(got["retry_after_seconds"]), \
                        f"{case_id}: written {c.get('retry_after_seconds')!r}, the server asked {got['retry_after_seconds']!r}"
            case = {"id": case_id, "status": c["status"], "retry": c["retry"]}
            if "retry_after" in c:
                case["retry_after"] = c["retry_after"]
            case["now"] = int(c["now"]) if c["now"].is_integer() else c["now"]
            case.update({"draw": repr(c["draw"]), "draw_bits": bits(c["draw"]), "max_retries": c["max_retries"],
                         "base": repr(c["base"]), "base_bits": bits(c["base"]),
                         "cap": repr(c["cap"]), "cap_bits": bits(c["cap"])})
            if "wait" in got:
                case.update({"wait": repr(got["wait"]), "wait_bits": bits(got["wait"])})
            else:
                case["give_up"] = got["give_up"]
                if "retry_after_seconds" in got:
                    case["retry_after_seconds"] = repr(got["retry_after_seconds"])
            out.append(case)
    ids = [c["id"] for c in out]
    assert len(set(ids)) == len(ids), "duplicate retry case ids"
    return out
