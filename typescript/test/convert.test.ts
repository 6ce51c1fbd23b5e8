import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  asFloat16Array,
  bfloat16ToFloat32,
  decodeJSON,
  float16BitsToFloat32Bits,
  float16ToFloat32,
  float32BitsToBfloat16Bits,
  float32BitsToFloat16Bits,
  float32ToBinary,
  float64ToBfloat16Bits,
  float64ToFloat16Bits,
  fromFloat32,
  makeTensor,
  toFloat32,
  unpackBits,
} from "../src/index.js";
import { float64ToSmallFloatBits } from "../src/convert.js";
import { assertDensewireError } from "./helpers.js";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const valueOf = (bits: number) => {
  u32[0] = bits;
  return f32[0]!;
};
let seed = 99;
const randomBits = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);

describe("conversions", () => {
  it("float16 widening is exact and narrows back to the same bits (all 65536 patterns)", () => {
    for (let h = 0; h < 65536; h++) {
      const w = float16BitsToFloat32Bits(h);
      const isNaN = (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
      assert.equal(float32BitsToFloat16Bits(w), isNaN ? (h & 0x8000) | 0x7e00 : h, `0x${h.toString(16)}`);
      if (!isNaN) assert.equal(float64ToFloat16Bits(valueOf(w)), h);
    }
    const all = float16ToFloat32(Uint16Array.from({ length: 65536 }, (_, i) => i));
    assert.equal(new Uint32Array(all.buffer)[0x7c01], 0x7f802000, "NaN payloads are carried when widening");
  });

  it("float32 to float16 agrees with an independent exact rounding on random patterns", () => {
    for (let k = 0; k < 200_000; k++) {
      const b = randomBits() >>> (k % 3 === 0 ? 0 : 4); // bias toward small magnitudes
      const bits = ((b & 0x7fffffff) | (k & 1 ? 0x80000000 : 0)) >>> 0;
      if ((bits & 0x7fffffff) > 0x7f800000) continue;
      assert.equal(float32BitsToFloat16Bits(bits), float64ToSmallFloatBits(valueOf(bits), 5, 10), `0x${bits.toString(16)}`);
    }
  });

  it("float32 to bfloat16 (the spec's formula) agrees with exact rounding on random patterns", () => {
    for (let k = 0; k < 200_000; k++) {
      const bits = randomBits();
      if ((bits & 0x7fffffff) > 0x7f800000) {
        assert.equal(float32BitsToBfloat16Bits(bits), ((bits >>> 16) & 0x8000) | 0x7fc0);
        continue;
      }
      assert.equal(float32BitsToBfloat16Bits(bits), float64ToSmallFloatBits(valueOf(bits), 8, 7), `0x${bits.toString(16)}`);
    }
    assert.equal(new Uint32Array(bfloat16ToFloat32(Uint16Array.from([0x3f80, 0xff81])).buffer)[1], 0xff810000);
  });

  it("JSON numbers round once, directly from float64 (no double rounding through float32)", () => {
    // 1 + 2^-11 + 2^-40: just above a float16 tie; through float32 it would become the tie and round to even
    const x = 1 + 2 ** -11 + 2 ** -40;
    assert.equal(Math.fround(x), 1 + 2 ** -11);
    assert.equal(float64ToFloat16Bits(x), 0x3c01);
    assert.equal(float32BitsToFloat16Bits(0x3f801000), 0x3c00);
    const t = decodeJSON(`{"data":[{"index":0,"embedding":[${x.toPrecision(17)}, 65519.99, 65520, 1e-300, -1e-300]}],"dtype":"float16"}`);
    assert.deepEqual(Array.from(t.data), [0x3c01, 0x7bff, 0x7c00, 0x0000, 0x8000]);
    const y = 1 + 2 ** -8 + 2 ** -40; // the same for bfloat16
    assert.equal(float64ToBfloat16Bits(y), 0x3f81);
    assert.equal(float64ToBfloat16Bits(3.5e38), 0x7f80);
  });

  it("packs and unpacks binary rows MSB first, low bits zero", () => {
    const packed = float32ToBinary(Float32Array.from([1, -1, 1, -1, 1, 1, 0, 0, 2, /**/ 0, 0, 0, 0, 0, 0, 0, 0, 5]), [2, 9]);
    assert.deepEqual(Array.from(packed), [0b10101100, 0b10000000, 0b00000000, 0b10000000]);
    assert.deepEqual(Array.from(unpackBits(Uint8Array.from([0xff, 0xff]), [1, 12])), Array(12).fill(1));
    assertDensewireError(() => unpackBits(new Uint8Array(3), [2, 12]), { category: "length_mismatch", offset: 3 });
  });

  it("fromFloat32 converts as a sender does and refuses to quantise to int8/uint8", () => {
    const v = Float32Array.from([0.1, -0, NaN, 1e6]);
    assert.deepEqual(Array.from(fromFloat32(v, [2, 2], "float16").data), [0x2e66, 0x8000, 0x7e00, 0x7c00]);
    assert.deepEqual(Array.from(fromFloat32(v, [2, 2], "bfloat16").data), [0x3dcd, 0x8000, 0x7fc0, 0x4974]);
    assert.deepEqual(Array.from(fromFloat32(v, [1, 4], "binary").data), [0b10010000]);
    assert.equal(fromFloat32(v, [2, 2], "float32").data, v);
    assert.equal(fromFloat32(v, [2, 2], "float64").data[0], Math.fround(0.1));
    assertDensewireError(() => fromFloat32(v, [2, 2], "int8"), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => fromFloat32(v, [3, 2], "float16"), { category: "shape_mismatch" });
  });

  it("toFloat32 widens every dtype", () => {
    assert.deepEqual(Array.from(toFloat32(makeTensor("int8", [1, 2], Int8Array.from([-3, 4])))), [-3, 4]);
    assert.deepEqual(Array.from(toFloat32(makeTensor("uint8", [1, 2], Uint8Array.from([200, 4])))), [200, 4]);
    assert.deepEqual(Array.from(toFloat32(makeTensor("float64", [1, 1], Float64Array.from([0.1])))), [Math.fround(0.1)]);
    assert.deepEqual(Array.from(toFloat32(makeTensor("binary", [1, 3], Uint8Array.from([0b10100000])))), [1, 0, 1]);
    assert.deepEqual(Array.from(toFloat32(makeTensor("bfloat16", [1, 1], Uint16Array.from([0xc020])))), [-2.5]);
  });

  it("asFloat16Array gives a view only where the runtime has Float16Array", () => {
    const bits = Uint16Array.from([0x3c00]);
    const native = (globalThis as { Float16Array?: unknown }).Float16Array;
    const v = asFloat16Array(bits);
    if (native === undefined) assert.equal(v, undefined);
    else assert.equal(v![0], 1);
  });
});
