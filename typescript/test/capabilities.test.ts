/** The golden runners' use of capabilities.json (capabilities.ts): unclaimed cases are listed, not run. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadCapabilities, plan } from "./capabilities.js";
import { loadGolden } from "./helpers.js";
import { loadTablesGolden } from "./tables-helpers.js";

describe("capabilities", () => {
  it("a planted unclaimed feature lists its cases and runs none of them", () => {
    const caps = loadCapabilities();
    caps.claims["typescript"] = caps.claims["typescript"]!.filter((f) => f !== "dtype.bfloat16");
    const cases = loadGolden("tensors");
    const p = plan({ "tensors.json": cases }, "typescript", caps);
    const bf16 = cases.filter((c) => c["dtype"] === "bfloat16").map((c) => c.id);
    assert.ok(bf16.length > 0);
    assert.deepEqual([...p.notClaimed.entries()], [["dtype.bfloat16", bf16]]);
    assert.equal(p.run.length, cases.length - bf16.length);
    assert.ok(p.run.every((c) => !bf16.includes(c.id)));
    assert.ok(p.lines.includes(`not claimed by typescript: ${bf16.length} cases: dtype.bfloat16 (${bf16.join(", ")})`));
  });

  it("an unclaimed table format lists its valid and invalid cases", () => {
    const caps = loadCapabilities();
    caps.claims["typescript"] = caps.claims["typescript"]!.filter((f) => f !== "table.csv");
    const p = plan({ "tables.json": loadTablesGolden() }, "typescript", caps);
    const ids = p.notClaimed.get("table.csv")!;
    assert.ok(ids.some((i) => i.startsWith("table.csv.")) && ids.some((i) => i.startsWith("invalid.table.csv.")));
    assert.ok(p.run.every((c) => c["format"] !== "csv"));
  });

  it("a claimed feature that no golden case needs is reported", () => {
    const caps = loadCapabilities();
    caps.claims["typescript"]!.push("planted.feature");
    const p = plan({ "conversions.json": loadGolden("conversions") }, "typescript", caps);
    assert.ok(p.unexercised.includes("planted.feature"));
    assert.ok(p.lines.some((l) => l.startsWith("claimed by typescript but exercised by no golden case: ") && l.includes("planted.feature")));
  });

  it("a case missing from capabilities.json fails the runner", () => {
    const caps = loadCapabilities();
    delete caps.cases["interop.json"]!["interop.openai.response_float"];
    assert.throws(() => plan({ "interop.json": loadGolden("interop") }, "typescript", caps), /interop\.openai\.response_float is not in capabilities\.json/);
  });
});
