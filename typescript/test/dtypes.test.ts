import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DTYPE_NAMES, DTYPES, isDType, itemCount, makeTensor, parseByteOrder, parseDType, row, rowBytes } from "../src/index.js";
import { bytesOf, swapBytes, viewAs } from "../src/dtypes.js";
import { assertDensewireError } from "./helpers.js";

describe("dtypes", () => {
  it("knows the names, sizes and Protobuf enums of SPEC.md section 2", () => {
    assert.deepEqual(DTYPE_NAMES, ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary"]);
    assert.deepEqual(DTYPE_NAMES.map((d) => DTYPES[d].protobuf), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual([rowBytes("float32", 3), rowBytes("float16", 3), rowBytes("float64", 3), rowBytes("int8", 3)], [12, 6, 24, 3]);
    assert.deepEqual([rowBytes("binary", 1), rowBytes("binary", 8), rowBytes("binary", 12), rowBytes("binary", 0)], [1, 1, 2, 0]);
    assert.equal(itemCount("binary", 2, 12), 4);
  });

  it("parses names strictly", () => {
    for (const bad of ["Float32", "fp16", "float8", "", "FLOAT32", "float32 "]) {
      assert.equal(isDType(bad), false);
      assertDensewireError(() => parseDType(bad), { category: "unknown_dtype", field: "dtype" });
    }
    assertDensewireError(() => parseDType(7, "x"), { category: "invalid_field", field: "x" });
    assertDensewireError(() => parseDType("toString"), { category: "unknown_dtype" });
    assert.equal(parseByteOrder("big"), "big");
    assertDensewireError(() => parseByteOrder("Little"), { category: "invalid_field", field: "byteorder" });
  });

  it("views aligned little-endian bytes without copying", () => {
    const body = new Uint8Array(20);
    const v = viewAs(body.subarray(4, 20), "float32");
    assert.equal(v.buffer, body.buffer);
    assert.equal(v.byteOffset, 4);
    assert.equal(v.length, 4);
    const i8 = viewAs(body.subarray(3, 6), "int8");
    assert.equal(i8.buffer, body.buffer);
  });

  it("copies unaligned bytes into an aligned buffer", () => {
    const body = new Uint8Array(13);
    new DataView(body.buffer).setUint32(1, 0x7fa00001, true);
    const v = viewAs(body.subarray(1, 13), "float32");
    assert.notEqual(v.buffer, body.buffer);
    assert.equal(new Uint32Array(v.buffer, v.byteOffset, 1)[0], 0x7fa00001, "a signalling NaN keeps its payload");
  });

  it("swaps big-endian items with integer moves (NaN payloads survive)", () => {
    const be = Uint8Array.from([0x7f, 0xa0, 0x00, 0x01, 0xff, 0xc0, 0x00, 0x00]);
    const owned = be.slice();
    const v = viewAs(owned, "float32", "big", true);
    assert.equal(v.buffer, owned.buffer, "swapped in place when owned");
    assert.deepEqual(Array.from(new Uint32Array(v.buffer)), [0x7fa00001, 0xffc00000]);
    const copy = viewAs(be, "float32", "big", false);
    assert.notEqual(copy.buffer, be.buffer);
    assert.equal(be[0], 0x7f, "input untouched");
    const b64 = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
    swapBytes(b64, 8);
    assert.deepEqual(Array.from(b64), [8, 7, 6, 5, 4, 3, 2, 1]);
    assert.deepEqual(Array.from(bytesOf(Uint16Array.from([0x0102]), 2, "big")), [1, 2]);
  });

  it("makeTensor checks the array type and the byte length", () => {
    const t = makeTensor("float16", [1, 2], new Uint16Array(2));
    assert.deepEqual(t.shape, [1, 2]);
    assertDensewireError(() => makeTensor("float32", [1, 2], new Float64Array(2) as never), { category: "invalid_field", field: "data" });
    assertDensewireError(() => makeTensor("float32", [1, 3], new Float32Array(2)), { category: "length_mismatch", offset: 8, field: "data" });
    assertDensewireError(() => makeTensor("binary", [2, 12], new Uint8Array(3)), { category: "length_mismatch", offset: 3 });
    assertDensewireError(() => makeTensor("float32", [1.5, 2] as never, new Float32Array(3)), { category: "invalid_field", field: "shape" });
  });

  it("row() gives views of rows", () => {
    const t = makeTensor("float32", [2, 3], Float32Array.from([1, 2, 3, 4, 5, 6]));
    assert.deepEqual(Array.from(row(t, 1)), [4, 5, 6]);
    assert.equal(row(t, 1).buffer, t.data.buffer);
    const b = makeTensor("binary", [2, 12], Uint8Array.from([1, 2, 3, 4]));
    assert.deepEqual(Array.from(row(b, 1)), [3, 4]);
    assert.throws(() => row(t, 2), RangeError);
  });
});
