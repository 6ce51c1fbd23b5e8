import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encode } from "@msgpack/msgpack";
import { decodeMsgpack, encodeMsgpack, makeTensor } from "../src/index.js";
import { assertDensewireError, fromHex, toHex } from "./helpers.js";

const t = makeTensor("float32", [2, 3], Float32Array.from([1, -2.5, 0.1, 3, 0.5, -1]));
const meta = { model: "m", usage: { prompt_tokens: 7, total_tokens: 7 } };

describe("MessagePack", () => {
  it("decodes data as a view of the body when aligned, else one copy", () => {
    const aligned = encode({ dtype: "uint8", shape: [1, 4], data: Uint8Array.from([1, 2, 3, 4]) });
    const a = decodeMsgpack(aligned);
    assert.equal(a.data.buffer, aligned.buffer, "1-byte dtypes are always views");
    // pad with an unknown key so that the float payload lands on a multiple of 4
    for (let pad = 0; pad < 4; pad++) {
      const body = encode({ x: "y".repeat(pad), dtype: "float32", shape: [2, 3], data: new Uint8Array(t.data.buffer) });
      const d = decodeMsgpack(body);
      const payloadOffset = d.data.buffer === body.buffer ? d.data.byteOffset - body.byteOffset : -1;
      assert.deepEqual(Array.from(d.data), Array.from(t.data));
      if (payloadOffset >= 0) assert.equal(payloadOffset % 4, 0);
    }
  });

  it("accepts keys in any order, integers of any width, unknown keys of any type", () => {
    const body = encode({
      usage: { total_tokens: 7, prompt_tokens: 7 },
      extra: [1, { a: null, b: [true, 1.5] }, new Uint8Array(3), -5, 2 ** 40],
      data: new Uint8Array(t.data.buffer),
      shape: [2, 3],
      model: "m",
      dtype: "float32",
    });
    const d = decodeMsgpack(body);
    assert.deepEqual(Array.from(d.data), Array.from(t.data));
    assert.deepEqual(d.usage, meta.usage);
    // shape as uint16 and uint64
    const wide = fromHex("83a56474797065a5696e743820a5736861706592cd0001cf0000000000000002a464617461c4020102");
    assertDensewireError(() => decodeMsgpack(wide), { category: "unknown_dtype", field: "dtype" }); // "int8 " is not a dtype
    const ok = fromHex("83a56474797065a4696e7438a5736861706592cd0001cf0000000000000002a464617461c4020102");
    assert.deepEqual(decodeMsgpack(ok).shape, [1, 2]);
  });

  it("encodes byte-exactly with the smallest representations", () => {
    const hex = toHex(encodeMsgpack(t, meta));
    assert.equal(hex, "85a56d6f64656ca16da56474797065a7666c6f61743332a57368617065920203a464617461c418" + toHex(new Uint8Array(t.data.buffer)) + "a5757361676582ad70726f6d70745f746f6b656e7307ac746f74616c5f746f6b656e7307");
    const big = makeTensor("uint8", [300, 256], new Uint8Array(300 * 256));
    const body = encodeMsgpack(big, { model: "x".repeat(40), usage: { prompt_tokens: 70000, total_tokens: 2 ** 33 } });
    assert.equal(toHex(body.subarray(0, 4)), "85a56d6f");
    assert.ok(toHex(body).includes("d928" + "78".repeat(40)), "str8 for a 40-byte model");
    assert.ok(toHex(body).includes("92cd012ccd0100"), "uint16 shape");
    assert.ok(toHex(body).includes("c6" + (300 * 256).toString(16).padStart(8, "0")), "bin32");
    assert.ok(toHex(body).endsWith("ce00011170ac746f74616c5f746f6b656e73cf0000000200000000"));
    assert.deepEqual(decodeMsgpack(body).usage, { prompt_tokens: 70000, total_tokens: 2 ** 33 });
  });

  it("reports truncation at the body's length for every prefix", () => {
    const body = encodeMsgpack(t, meta);
    for (let len = 0; len < body.length; len++) {
      assertDensewireError(() => decodeMsgpack(body.subarray(0, len)), { category: "truncated", offset: len });
    }
  });

  it("locates malformed bodies", () => {
    assertDensewireError(() => decodeMsgpack(fromHex("a3616263")), { category: "malformed", offset: 0 });
    assertDensewireError(() => decodeMsgpack(fromHex("c0")), { category: "malformed", offset: 0 });
    // a non-str key at offset 1, and one deeper in an unknown value
    assertDensewireError(() => decodeMsgpack(fromHex("81 01 02".replace(/ /g, ""))), { category: "malformed", offset: 1 });
    assertDensewireError(() => decodeMsgpack(fromHex("82a178 81 c3 01 a464617461c400".replace(/ /g, ""))), { category: "malformed", offset: 4 });
    // the unused type byte 0xc1
    assertDensewireError(() => decodeMsgpack(fromHex("81a178c1")), { category: "malformed", offset: 3 });
    // __proto__ as a key
    assertDensewireError(() => decodeMsgpack(fromHex("81a95f5f70726f746f5f5f01")), { category: "malformed", offset: 1 });
    // trailing bytes
    const body = encodeMsgpack(t);
    const extra = new Uint8Array(body.length + 2);
    extra.set(body);
    assertDensewireError(() => decodeMsgpack(extra), { category: "malformed", offset: body.length });
    // the shared decoder still works after errors
    assert.equal(decodeMsgpack(body).dtype, "float32");
  });

  it("names wrong fields", () => {
    const base = { dtype: "float32", shape: [1, 1], data: new Uint8Array(4) };
    const bad = (o: Record<string, unknown>) => encode({ ...base, ...o });
    assertDensewireError(() => decodeMsgpack(bad({ dtype: 1 })), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => decodeMsgpack(encode({ shape: [1, 1], data: new Uint8Array(4) })), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => decodeMsgpack(bad({ shape: [1, -1] })), { category: "invalid_field", field: "shape" });
    assertDensewireError(() => decodeMsgpack(bad({ shape: [1, 1.5] })), { category: "invalid_field", field: "shape" });
    assertDensewireError(() => decodeMsgpack(bad({ shape: "1,1" })), { category: "invalid_field", field: "shape" });
    assertDensewireError(() => decodeMsgpack(bad({ data: [0, 0, 0, 0] })), { category: "invalid_field", field: "data" });
    assertDensewireError(() => decodeMsgpack(bad({ model: 3 })), { category: "invalid_field", field: "model" });
    // usage counts are non-negative integers (an absent one is 0, as in Python's Usage.parse)
    assert.deepEqual(decodeMsgpack(bad({ usage: { prompt_tokens: 1 } })).usage, { prompt_tokens: 1, total_tokens: 0 });
    assertDensewireError(() => decodeMsgpack(bad({ usage: [1, 1] })), { category: "invalid_field", field: "usage" });
    assertDensewireError(() => decodeMsgpack(bad({ usage: { prompt_tokens: -1, total_tokens: 1 } })), { category: "invalid_field", field: "usage.prompt_tokens" });
    assertDensewireError(() => decodeMsgpack(bad({ usage: { prompt_tokens: 1, total_tokens: 1.5 } })), { category: "invalid_field", field: "usage.total_tokens" });
    assertDensewireError(() => decodeMsgpack(bad({ usage: { prompt_tokens: "1", total_tokens: 1 } })), { category: "invalid_field", field: "usage.prompt_tokens" });
    assertDensewireError(() => decodeMsgpack(bad({ usage: { prompt_tokens: null, total_tokens: 1 } })), { category: "invalid_field", field: "usage.prompt_tokens" });
    assertDensewireError(() => decodeMsgpack(bad({ data: new Uint8Array(5) })), { category: "length_mismatch", offset: 4, field: "data" });
  });

  it("tells a float usage count from an integer one behind values of every kind", () => {
    // {"x": [ext8, {"k": bin8}, [[nil]], str8], "dtype": "uint8", "shape": [1, 1], "data": bin(1), "usage": {...}}
    const prefix = "85a17894c70201abcd81a16bc40201ff9191c0d903616263a56474797065a575696e7438a57368617065920101a464617461c40107a5757361676582";
    const counts = (total: string) => fromHex(prefix + "ad70726f6d70745f746f6b656e7302" + "ac746f74616c5f746f6b656e73" + total);
    assert.deepEqual(decodeMsgpack(counts("03")).usage, { prompt_tokens: 2, total_tokens: 3 });
    assert.deepEqual(decodeMsgpack(counts("cd0100")).usage, { prompt_tokens: 2, total_tokens: 256 });
    assertDensewireError(() => decodeMsgpack(counts("ca40400000")), { category: "invalid_field", field: "usage.total_tokens" }); // float32 3.0
    assertDensewireError(() => decodeMsgpack(counts("cb4008000000000000")), { category: "invalid_field", field: "usage.total_tokens" }); // float64 3.0
  });
});
