/**
 * Every case of testdata/golden/retry.json (SPEC.md section 18) that TypeScript claims, one test per
 * case id: the wait before a retry, or giving up, through `retryWait` (the function `fetchWithRetry`
 * calls) with the case's draw injected as the policy's `random`; waits compared bit for bit.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_RETRY_AFTER_SECONDS, parseRetryAfter, retryPolicy, retryWait } from "../src/index.js";
import { claimedCases } from "./capabilities.js";
import { type GoldenCase, loadGolden } from "./helpers.js";

function f64(bits: string): number {
  return Buffer.from(bits, "hex").readDoubleBE(0);
}

function bitsOf(x: number): string {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(x, 0);
  return b.toString("hex");
}

/** Seconds as the options' milliseconds, checked to come back exactly as the case's seconds. */
function ms(seconds: number): number {
  const m = seconds * 1000;
  assert.equal(bitsOf(m / 1000), bitsOf(seconds), `${seconds} s is no exact number of milliseconds`);
  return m;
}

describe("retry.json golden cases (SPEC.md 18)", () => {
  for (const c of claimedCases({ "retry.json": loadGolden("retry") }) as GoldenCase[]) {
    it(c.id, () => {
      const draw = f64(c["draw_bits"] as string);
      assert.equal(String(draw), c["draw"] === "0.0" ? "0" : c["draw"]);
      const policy = retryPolicy({
        maxRetries: c["max_retries"] as number,
        backoffBaseMs: ms(f64(c["base_bits"] as string)),
        backoffMaxMs: ms(f64(c["cap_bits"] as string)),
        random: () => draw,
      });
      const failure = { status: c["status"] as number, retryAfter: c["retry_after"] as string | undefined, now: c["now"] as number };
      const wait = retryWait(c["retry"] as number, failure, policy);
      if ("wait" in c) {
        assert.ok(wait !== undefined, `gave up, the spec waits ${String(c["wait"])} s`);
        assert.equal(bitsOf(wait), c["wait_bits"], `waits ${wait}, the spec ${String(c["wait"])}`);
        return;
      }
      assert.equal(wait, undefined, `waits ${wait} s, the spec gives up (${String(c["give_up"])})`);
      if (c["give_up"] === "retry_after_too_long") {
        const ms = parseRetryAfter(c["retry_after"] as string, (c["now"] as number) * 1000)!;
        assert.ok(ms > MAX_RETRY_AFTER_SECONDS * 1000);
        assert.equal(ms, Number(c["retry_after_seconds"]) * 1000); // what the error's retryAfterMs carries
      }
    });
  }
});
