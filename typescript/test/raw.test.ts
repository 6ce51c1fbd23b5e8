import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeRaw, encodeRaw, getHeader, makeTensor } from "../src/index.js";
import { assertDensewireError } from "./helpers.js";

const headers = { "Densewire-Dtype": "float32", "Densewire-Shape": "2,2" };

describe("raw bodies", () => {
  it("decodes as a view over an aligned body", () => {
    const body = new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer);
    const t = decodeRaw(body, headers);
    assert.equal(t.data.buffer, body.buffer);
    assert.deepEqual(Array.from(t.data), [1, 2, 3, 4]);
    assert.deepEqual(Array.from(decodeRaw(body.buffer, headers).data), [1, 2, 3, 4]);
  });

  it("copies an unaligned body", () => {
    const big = new Uint8Array(17);
    big.set(new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer), 1);
    const t = decodeRaw(big.subarray(1), headers);
    assert.notEqual(t.data.buffer, big.buffer);
    assert.deepEqual(Array.from(t.data), [1, 2, 3, 4]);
  });

  it("matches header names case-insensitively in Headers, plain objects and Maps", () => {
    const body = new Uint8Array(8);
    const h = new Headers({ "densewire-dtype": "float16", "DENSEWIRE-SHAPE": "1,4", "Densewire-Model": "m", "Densewire-Prompt-Tokens": "3", "Densewire-Total-Tokens": "4" });
    const t = decodeRaw(body, h);
    assert.equal(t.dtype, "float16");
    assert.equal(t.model, "m");
    assert.deepEqual(t.usage, { prompt_tokens: 3, total_tokens: 4 });
    assert.equal(decodeRaw(body, { "densewire-dtype": "uint8", "densewire-shape": "2,4" }).dtype, "uint8");
    assert.equal(getHeader(new Map([["densewire-shape", "1,2"]]), "Densewire-Shape"), "1,2");
    assert.equal(getHeader({ "x-a": ["1", "2"] }, "X-A"), "1, 2");
  });

  it("rejects missing or malformed headers, naming them", () => {
    const body = new Uint8Array(16);
    assertDensewireError(() => decodeRaw(body, { "Densewire-Dtype": "float32" }), { category: "invalid_field", field: "Densewire-Shape" });
    for (const shape of ["2, 2", "2x2", "02,2", "2,2,1", "", "-0,4", "2.0,2"]) {
      assertDensewireError(() => decodeRaw(body, { "Densewire-Dtype": "float32", "Densewire-Shape": shape }), { category: "invalid_field", field: "Densewire-Shape" });
    }
    assertDensewireError(() => decodeRaw(body, { ...headers, "Densewire-Dtype": "Float32" }), { category: "unknown_dtype", field: "Densewire-Dtype" });
    assertDensewireError(() => decodeRaw(body, { ...headers, "Densewire-Byteorder": "big" }), { category: "invalid_field", field: "Densewire-Byteorder" });
    assertDensewireError(() => decodeRaw(body, { ...headers, "Densewire-Prompt-Tokens": "x", "Densewire-Total-Tokens": "1" }), { category: "invalid_field", field: "Densewire-Prompt-Tokens" });
    assertDensewireError(() => decodeRaw(body.subarray(0, 15), headers), { category: "length_mismatch", offset: 15 });
    assertDensewireError(() => decodeRaw(new Uint8Array(20), headers), { category: "length_mismatch", offset: 16 });
  });

  it("encodes with the tensor's memory as the body", () => {
    const t = makeTensor("float32", [1, 2], new Float32Array([1, 2]));
    const { body, headers: h } = encodeRaw(t);
    assert.equal(body.buffer, t.data.buffer);
    assert.deepEqual(h, { "Densewire-Version": "1", "Densewire-Dtype": "float32", "Densewire-Shape": "1,2", "Densewire-Byteorder": "little" });
  });
});
