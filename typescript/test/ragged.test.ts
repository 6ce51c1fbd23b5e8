/** Ragged and sparse tensors beyond their golden cases (ragged-golden.test.ts): views, builders, checks. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeRaggedMsgpack, decodeRaggedRaw, decodeSparseJSON, encodeRaggedMsgpack, encodeRaggedRaw, makeRagged, makeSparse, raggedMatrix, sparseVector } from "../src/index.js";
import { assertDensewireError } from "./helpers.js";

describe("ragged tensors", () => {
  // two inputs: 2 tokens and 1 token of d = 3
  const t = makeRagged("float32", 3, Uint32Array.of(0, 2, 3), Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9]));

  it("gives each matrix as a view over the one buffer", () => {
    const m = raggedMatrix(t, 1);
    assert.deepEqual([m.shape, Array.from(m.data)], [[1, 3], [7, 8, 9]]);
    assert.equal(m.data.buffer, t.data.buffer);
    t.data[6] = 70;
    assert.equal(m.data[0], 70);
    t.data[6] = 7;
    assert.throws(() => raggedMatrix(t, 2), RangeError);
  });

  it("decodes a raw body without copying the rows (aligned) and round-trips MessagePack", () => {
    const { body, headers } = encodeRaggedRaw(t);
    const back = decodeRaggedRaw(body, headers);
    assert.equal(back.data.buffer, body.buffer);
    assert.deepEqual(Array.from(raggedMatrix(back, 0).data), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(Array.from(decodeRaggedMsgpack(encodeRaggedMsgpack(t)).offsets), [0, 2, 3]);
  });

  it("checks the parts it is given", () => {
    assertDensewireError(() => makeRagged("float32", 3, Uint32Array.of(0, 2, 1), new Float32Array(3)), { category: "invalid_field", offset: 8, field: "offsets" });
    assertDensewireError(() => makeRagged("float32", 3, Uint32Array.of(0, 2), new Float32Array(5)), { category: "length_mismatch", offset: 20, field: "data" });
  });
});

describe("sparse tensors", () => {
  it("gives each vector's indices and values as views", () => {
    const s = makeSparse("float32", 30522, Uint32Array.of(0, 2, 3), Uint32Array.of(1, 7, 5), Float32Array.from([0.5, 0.25, 1.5]));
    const v = sparseVector(s, 0);
    assert.deepEqual([Array.from(v.indices), Array.from(v.values)], [[1, 7], [0.5, 0.25]]);
    assert.equal(v.indices.buffer, s.indices.buffer);
  });

  it("refuses unsorted, repeated and out-of-vocabulary indices, and non-float values", () => {
    assertDensewireError(() => makeSparse("float32", 10, Uint32Array.of(0, 2), Uint32Array.of(3, 3), new Float32Array(2)), { category: "invalid_field", offset: 4, field: "indices" });
    assertDensewireError(() => makeSparse("float32", 10, Uint32Array.of(0, 1), Uint32Array.of(10), new Float32Array(1)), { category: "invalid_field", offset: 0, field: "indices" });
    assertDensewireError(() => makeSparse("int8" as never, 10, Uint32Array.of(0), new Uint32Array(0), new Int8Array(0)), { category: "invalid_field", field: "dtype" });
    const doc = { object: "list", kind: "sparse", dtype: "float32", dimensions: 10, data: [{ index: 0, indices: [4, 2], values: [1, 2] }] };
    assertDensewireError(() => decodeSparseJSON(doc), { category: "invalid_field", field: "data[0].indices[1]" });
  });
});
