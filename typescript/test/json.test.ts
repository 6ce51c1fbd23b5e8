import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type DType, type Tensor, decodeJSON, encodeJSON, makeTensor } from "../src/index.js";
import { assertDensewireError, tensorItems } from "./helpers.js";

const env = (data: unknown[], extra: Record<string, unknown> = {}) => JSON.stringify({ object: "list", data, ...extra });
const item = (index: number, embedding: unknown) => ({ object: "embedding", index, embedding });

describe("JSON envelope decoding", () => {
  it("defaults dtype to float32, byteorder to little, d to the first row", () => {
    const t = decodeJSON(env([item(0, "AACAPwAAAEA=")]));
    assert.equal(t.dtype, "float32");
    assert.deepEqual(t.shape, [1, 2]);
    assert.deepEqual(Array.from(t.data), [1, 2]);
    assert.equal(t.model, undefined);
    assert.equal(t.usage, undefined);
    const f = decodeJSON(env([item(0, [1, 2, 3])]));
    assert.deepEqual(f.shape, [1, 3]);
    const empty = decodeJSON(env([]));
    assert.deepEqual(empty.shape, [0, 0]);
  });

  it("places rows by index", () => {
    const t = decodeJSON(env([item(2, [3]), item(0, [1]), item(1, "AAAAQA==")]));
    assert.deepEqual(Array.from(t.data), [1, 2, 3]);
  });

  it("derives d of binary rows from packed bytes, or takes dimensions", () => {
    assert.deepEqual(decodeJSON(env([item(0, [255, 128])], { dtype: "binary" })).shape, [1, 16]);
    assert.deepEqual(decodeJSON(env([item(0, "s/A=")], { dtype: "binary" })).shape, [1, 16]);
    assert.deepEqual(decodeJSON(env([item(0, "s/A=")], { dtype: "binary", dimensions: 12 })).shape, [1, 12]);
    assertDensewireError(() => decodeJSON(env([item(0, [1])], { dtype: "binary", dimensions: 12 })), { category: "shape_mismatch", field: "data[0].embedding" });
  });

  it("reports a huge declared dimensions as the row's error, without allocating it", () => {
    // found by fuzzing: a RangeError from the typed array allocation before any row was checked
    const huge = env([item(0, [255, 0, 240])], { dtype: "binary", dimensions: 2222222222222220 });
    assertDensewireError(() => decodeJSON(huge), { category: "shape_mismatch", field: "data[0].embedding" });
    const b64 = env([item(0, "AACAPw==")], { dimensions: 1e12 });
    assertDensewireError(() => decodeJSON(b64), { category: "length_mismatch", field: "data[0].embedding", offset: 4 });
    assertDensewireError(() => decodeJSON(env([item(0, "AA*A")], { dimensions: 1e12 })), { category: "invalid_base64", offset: 2 });
  });

  it("reads big-endian Base64 rows of every width", () => {
    assert.deepEqual(Array.from(decodeJSON(env([item(0, "PAA=")], { dtype: "float16", byteorder: "big" })).data), [0x3c00]);
    assert.deepEqual(Array.from(decodeJSON(env([item(0, "P/AAAAAAAAA=")], { dtype: "float64", byteorder: "big" })).data), [1]);
    assert.deepEqual(Array.from(decodeJSON(env([item(0, "gH8=")], { dtype: "int8", byteorder: "big" })).data), [-128, 127]);
  });

  it("checks integer items of int8, uint8 and binary rows", () => {
    assert.deepEqual(Array.from(decodeJSON(env([item(0, [-128, 127])], { dtype: "int8" })).data), [-128, 127]);
    assertDensewireError(() => decodeJSON(env([item(0, [128])], { dtype: "int8" })), { category: "invalid_field", field: "data[0].embedding[0]" });
    assertDensewireError(() => decodeJSON(env([item(0, [0, 1.5])], { dtype: "uint8" })), { category: "invalid_field", field: "data[0].embedding[1]" });
    assertDensewireError(() => decodeJSON(env([item(0, [256])], { dtype: "binary" })), { category: "invalid_field", field: "data[0].embedding[0]" });
    assertDensewireError(() => decodeJSON(env([item(0, [1, "2"])])), { category: "invalid_field", field: "data[0].embedding[1]" });
    assertDensewireError(() => decodeJSON(env([item(0, [1, null])])), { category: "invalid_field", field: "data[0].embedding[1]" });
  });

  it("names the field of every structural error", () => {
    assertDensewireError(() => decodeJSON("[1,2]"), { category: "malformed" });
    assertDensewireError(() => decodeJSON('{"data":{}}'), { category: "invalid_field", field: "data" });
    assertDensewireError(() => decodeJSON(env([7])), { category: "invalid_field", field: "data[0]" });
    assertDensewireError(() => decodeJSON(env([{ embedding: [1] }])), { category: "invalid_field", field: "data[0].index" });
    assertDensewireError(() => decodeJSON(env([item(0.5, [1])])), { category: "shape_mismatch", field: "data[0].index" });
    assertDensewireError(() => decodeJSON(env([item(0, [1])], { dimensions: -1 })), { category: "invalid_field", field: "dimensions" });
    assertDensewireError(() => decodeJSON(env([item(0, [1])], { dtype: 32 })), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => decodeJSON(env([item(0, "AACAPwAAAE")])), { category: "length_mismatch", offset: 4, field: "data[0].embedding" });
    assertDensewireError(() => decodeJSON(env([item(0, "AACAPwAAAEAAAA==")], { dtype: "float64" })), { category: "length_mismatch", offset: 8, field: "data[0].embedding" });
    assertDensewireError(() => decodeJSON("{\"data\":[],}"), { category: "malformed" });
    assertDensewireError(() => decodeJSON('{"data":[{"index":0,"embedding":[Infinity]}]}'), { category: "malformed" });
  });

  it("reads UTF-8 bytes, and rejects invalid UTF-8", () => {
    const bytes = new TextEncoder().encode(env([item(0, [1])], { model: "modèle" }));
    assert.equal(decodeJSON(bytes).model, "modèle");
    assert.equal(decodeJSON(bytes.buffer).model, "modèle");
    assertDensewireError(() => decodeJSON(Uint8Array.from([0x7b, 0xff, 0x7d])), { category: "malformed" });
  });

  it("accepts already parsed documents and ignores unknown keys", () => {
    const t = decodeJSON({ data: [{ index: 0, embedding: [1], extra: true }], whatever: 1, usage: { prompt_tokens: 1, total_tokens: 2 } });
    assert.deepEqual(t.usage, { prompt_tokens: 1, total_tokens: 2 });
  });

  it("holds usage counts to non-negative integers, naming the count", () => {
    const env = (usage: unknown) => JSON.stringify({ data: [{ index: 0, embedding: [1] }], usage });
    assert.deepEqual(decodeJSON(env({ total_tokens: 4 })).usage, { prompt_tokens: 0, total_tokens: 4 });
    assert.equal(decodeJSON(env(null)).usage, undefined);
    assertDensewireError(() => decodeJSON(env(3)), { category: "invalid_field", field: "usage" });
    assertDensewireError(() => decodeJSON(env({ prompt_tokens: -1, total_tokens: 1 })), { category: "invalid_field", field: "usage.prompt_tokens" });
    assertDensewireError(() => decodeJSON(env({ prompt_tokens: 1, total_tokens: 2.5 })), { category: "invalid_field", field: "usage.total_tokens" });
    assertDensewireError(() => decodeJSON(env({ prompt_tokens: 1, total_tokens: "2" })), { category: "invalid_field", field: "usage.total_tokens" });
    assertDensewireError(() => decodeJSON(env({ prompt_tokens: true, total_tokens: 2 })), { category: "invalid_field", field: "usage.prompt_tokens" });
  });
});

describe("JSON envelope encoding", () => {
  const f32 = (...bits: number[]) => new Float32Array(Uint32Array.from(bits).buffer);

  it("writes the shortest decimal that reads back to the same bits", () => {
    const t = makeTensor("float32", [1, 6], f32(0x3dcccccd, 0x80000000, 0x00000001, 0x7f7fffff, 0x3f800000, 0x3eaaaaab));
    const text = encodeJSON(t, { encodingFormat: "float" });
    assert.match(text, /"embedding":\[0\.1,-0\.0,1e-45,3\.4028235e\+38,1,0\.33333334\]/);
    const h = makeTensor("float16", [1, 3], Uint16Array.from([0x2e66, 0x7bff, 0x0001]));
    assert.match(encodeJSON(h, { encodingFormat: "float" }), /\[0\.1,65500,6e-8\]/);
    const b = makeTensor("bfloat16", [1, 2], Uint16Array.from([0x3dcd, 0xc020]));
    assert.match(encodeJSON(b, { encodingFormat: "float" }), /\[0\.1,-2\.5\]/);
    assert.deepEqual(tensorItems(decodeJSON(encodeJSON(b, { encodingFormat: "float" }))), ["3dcd", "c020"]);
  });

  it("refuses NaN and infinities as numbers, naming the item", () => {
    const t = makeTensor("float64", [2, 2], Float64Array.from([1, 2, 3, -Infinity]));
    assertDensewireError(() => encodeJSON(t, { encodingFormat: "float" }), { category: "non_finite", field: "data[1].embedding[1]" });
    assert.ok(encodeJSON(t, { encodingFormat: "base64" }).includes('"dimensions":2'));
  });

  it("round-trips random tensors of every dtype in both formats and byte orders", () => {
    let seed = 5;
    const rnd = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
    const dtypes: DType[] = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary"];
    for (const dtype of dtypes) {
      const [n, d] = [3, dtype === "binary" ? 13 : 5];
      const count = dtype === "binary" ? n * 2 : n * d;
      const size = { float32: 4, float16: 2, bfloat16: 2, float64: 8, int8: 1, uint8: 1, binary: 1 }[dtype];
      const bytes = Uint8Array.from({ length: count * size }, () => rnd() & 0xff);
      if (dtype === "binary") for (let r = 0; r < n; r++) bytes[r * 2 + 1]! &= 0xf8; // unused bits 0
      const Ctor = { float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, binary: Uint8Array }[dtype];
      const t = makeTensor(dtype, [n, d], new Ctor(bytes.buffer) as never) as Tensor;
      for (const byteorder of ["little", "big"] as const) {
        const back = decodeJSON(encodeJSON(t, { encodingFormat: "base64", byteorder }));
        assert.deepEqual(tensorItems(back), tensorItems(t), `${dtype} base64 ${byteorder}`);
      }
      let text: string;
      try {
        text = encodeJSON(t, { encodingFormat: "float" });
      } catch {
        continue; // random bits hold NaN or infinities: only Base64 carries them
      }
      const back = decodeJSON(text);
      assert.deepEqual(tensorItems(back), tensorItems(t), `${dtype} float`);
    }
  });

  it("uses the tensor's model and usage unless overridden", () => {
    const t = { ...makeTensor("uint8", [1, 1], Uint8Array.from([9])), model: "m", usage: { prompt_tokens: 1, total_tokens: 1 } };
    const doc = JSON.parse(encodeJSON(t, { encodingFormat: "float" }));
    assert.equal(doc.model, "m");
    assert.deepEqual(doc.data[0].embedding, [9]);
    assert.equal(JSON.parse(encodeJSON(t, { model: "x" })).model, "x");
    assert.throws(() => encodeJSON(t, { encodingFormat: "hex" as never }), /encoding_format/);
  });
});
