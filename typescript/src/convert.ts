/**
 * Conversions of SPEC.md section 3, on bits, so that NaN payloads, signed zeros and subnormals are
 * never touched by a float register:
 *
 * - float32 to float16 and to bfloat16: round to nearest, ties to even; NaN to the canonical quiet
 *   NaN with the sign kept (`0x7E00`/`0xFE00`, `0x7FC0`/`0xFFC0`).
 * - float32 to binary: bit set iff the value is > 0, packed MSB first, rows padded with zero bits.
 * - float64 to float32, float16 and bfloat16 (JSON numbers, section 3.5): rounded once, directly.
 * - Widening: float16 and bfloat16 to float32 exactly; packed bits to one byte (0/1) per dimension.
 */
import { DensewireError } from "./errors.js";
import { type DType, type Tensor, allocData, checkShape, makeTensor } from "./dtypes.js";

// ------------------------------------------------------------------------------------ single items

/** float32 bits to float16 bits (SPEC.md section 3.1). */
export function float32BitsToFloat16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const a = x & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00; // NaN: canonical quiet NaN, sign kept
  if (a >= 0x477ff000) return sign | 0x7c00; // rounds above 65504 (from 65520 on), or infinity
  if (a >= 0x38800000) {
    // a float16 normal: rebias the exponent (127 -> 15) and round the 23-bit fraction to 10 bits
    const r = a - 0x38000000;
    return sign | ((r + 0x0fff + ((r >>> 13) & 1)) >>> 13);
  }
  if (a <= 0x33000000) return sign; // at most 2^-25 (a tie, to even): signed zero; float32 subnormals too
  // a float16 subnormal: value / 2^-24 = m * 2^(e - 126), rounded to an integer, ties to even
  const e = a >>> 23;
  const m = (a & 0x7fffff) | 0x800000;
  const shift = 126 - e; // 14..24
  let q = m >>> shift;
  const rem = m & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && (q & 1) === 1)) q++;
  return sign | q;
}

/** float32 bits to bfloat16 bits (SPEC.md section 3.2). */
export function float32BitsToBfloat16Bits(b: number): number {
  if ((b & 0x7fffffff) > 0x7f800000) return ((b >>> 16) & 0x8000) | 0x7fc0;
  return ((b >>> 0) + 0x7fff + ((b >>> 16) & 1)) >>> 16;
}

/** float16 bits to float32 bits, exactly (NaN payloads are carried into the wider fraction). */
export function float16BitsToFloat32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (man << 13)) >>> 0;
  if (exp !== 0) return (sign | ((exp + 112) << 23) | (man << 13)) >>> 0;
  if (man === 0) return sign >>> 0;
  // subnormal: normalise
  let e = 113;
  let m = man;
  while ((m & 0x400) === 0) {
    m <<= 1;
    e--;
  }
  return (sign | (e << 23) | ((m & 0x3ff) << 13)) >>> 0;
}

const F64 = new Float64Array(1);
const F64_U32 = new Uint32Array(F64.buffer);
const F32 = new Float32Array(1);
const F32_U32 = new Uint32Array(F32.buffer);
const HI = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;

/** float64 to float32 bits (SPEC.md section 3.3): ties to even; NaN to `0x7FC00000` with the sign kept. */
export function float64ToFloat32Bits(x: number): number {
  if (x !== x) {
    F64[0] = x;
    return ((F64_U32[HI]! & 0x80000000) | 0x7fc00000) >>> 0;
  }
  F32[0] = x; // IEEE round to nearest even, overflow to infinity
  return F32_U32[0]!;
}

/** float32 bits to the number they encode (exact). */
export function float32BitsToNumber(bits: number): number {
  F32_U32[0] = bits;
  return F32[0]!;
}

/** The 64 bits of a float64 (for messages and tests). */
export function float64Bits(x: number): bigint {
  F64[0] = x;
  return (BigInt(F64_U32[HI]!) << 32n) | BigInt(F64_U32[1 - HI]!);
}

/**
 * A finite float64 rounded directly to an IEEE binary format of `ebits` exponent and `mbits`
 * fraction bits, ties to even, overflow to infinity (SPEC.md section 3.5). Used for JSON numbers read
 * as float16 (5, 10) and bfloat16 (8, 7), which must not round twice through float32.
 */
export function float64ToSmallFloatBits(x: number, ebits: number, mbits: number): number {
  const signBit = x < 0 || Object.is(x, -0) ? 1 << (ebits + mbits) : 0;
  const expAll = (1 << ebits) - 1;
  if (x !== x) return signBit | (expAll << mbits) | (1 << (mbits - 1));
  const a = Math.abs(x);
  if (a === Infinity) return signBit | (expAll << mbits);
  if (a === 0) return signBit;
  const bias = (1 << (ebits - 1)) - 1;
  const emin = 1 - bias;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  if (e < emin) e = emin;
  const scaled = a * 2 ** (mbits - e); // exact: a power-of-two scaling, < 2^(mbits + 1)
  let q = Math.floor(scaled);
  const r = scaled - q;
  if (r > 0.5 || (r === 0.5 && q % 2 === 1)) q++;
  if (q >= 2 ** (mbits + 1)) {
    q /= 2;
    e++;
  }
  if (q < 2 ** mbits) return signBit | q; // subnormal or zero
  const biased = e + bias;
  if (biased >= expAll) return signBit | (expAll << mbits);
  return signBit | (biased << mbits) | (q - 2 ** mbits);
}

/** A JSON number (float64) as float16 bits (SPEC.md section 3.5). */
export function float64ToFloat16Bits(x: number): number {
  return float64ToSmallFloatBits(x, 5, 10);
}

/** A JSON number (float64) as bfloat16 bits (SPEC.md section 3.5). */
export function float64ToBfloat16Bits(x: number): number {
  return float64ToSmallFloatBits(x, 8, 7);
}

// ------------------------------------------------------------------------------------ whole arrays

function bitsOf(src: Float32Array): Uint32Array {
  return src.byteOffset % 4 === 0
    ? new Uint32Array(src.buffer as ArrayBuffer, src.byteOffset, src.length)
    : new Uint32Array(src.slice().buffer);
}

/** float32 values to float16 bits (SPEC.md section 3.1). */
export function float32ToFloat16(src: Float32Array): Uint16Array {
  const bits = bitsOf(src);
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = float32BitsToFloat16Bits(bits[i]!);
  return out;
}

/** float32 values to bfloat16 bits (SPEC.md section 3.2). */
export function float32ToBfloat16(src: Float32Array): Uint16Array {
  const bits = bitsOf(src);
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = float32BitsToBfloat16Bits(bits[i]!);
  return out;
}

/** float64 values to float32 (SPEC.md section 3.3): ties to even, NaN canonical with the sign kept. */
export function float64ToFloat32(src: Float64Array): Float32Array {
  const out = new Float32Array(src.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < src.length; i++) {
    const v = src[i]!;
    if (v === v) out[i] = v;
    else bits[i] = float64ToFloat32Bits(v);
  }
  return out;
}

/**
 * float32 rows to packed bits (SPEC.md section 3.4): bit `7 - j % 8` of byte `j / 8` of a row is 1 iff
 * dimension j is > 0 (so -0, +0, NaN and negatives give 0). Each row's unused low bits are 0.
 */
export function float32ToBinary(src: Float32Array, shape: readonly [number, number]): Uint8Array {
  const [n, d] = checkShape(shape);
  if (src.length !== n * d) {
    throw new DensewireError("shape_mismatch", `${src.length} values do not make a (${n}, ${d}) tensor`, { field: "data" });
  }
  const w = Math.ceil(d / 8);
  const out = new Uint8Array(n * w);
  for (let r = 0; r < n; r++) {
    const base = r * d;
    const ob = r * w;
    for (let j = 0; j < d; j++) {
      if (src[base + j]! > 0) out[ob + (j >>> 3)]! |= 0x80 >>> (j & 7);
    }
  }
  return out;
}

let f16Table: Uint32Array | undefined;

/** float16 bits widened exactly to float32 (a 256 KiB lookup table is built on first use). */
export function float16ToFloat32(bits: Uint16Array): Float32Array {
  if (f16Table === undefined) {
    f16Table = new Uint32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = float16BitsToFloat32Bits(h);
  }
  const table = f16Table;
  const out = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = table[bits[i]!]!;
  return new Float32Array(out.buffer);
}

/** bfloat16 bits widened exactly to float32 (the bits become the top half). */
export function bfloat16ToFloat32(bits: Uint16Array): Float32Array {
  const out = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = bits[i]! << 16;
  return new Float32Array(out.buffer);
}

/** Packed binary rows to one byte per dimension (0 or 1), `n * d` bytes; unused low bits are ignored. */
export function unpackBits(packed: Uint8Array, shape: readonly [number, number]): Uint8Array {
  const [n, d] = checkShape(shape);
  const w = Math.ceil(d / 8);
  if (packed.length !== n * w) {
    throw new DensewireError("length_mismatch", `${packed.length} packed bytes for shape (${n}, ${d}), expected ${n * w}`, {
      offset: Math.min(packed.length, n * w),
    });
  }
  const out = new Uint8Array(n * d);
  for (let r = 0; r < n; r++) {
    for (let j = 0; j < d; j++) out[r * d + j] = (packed[r * w + (j >>> 3)]! >>> (7 - (j & 7))) & 1;
  }
  return out;
}

/** Float16Array where the runtime has one (ES2025), else undefined. */
const Float16ArrayCtor = (globalThis as { Float16Array?: new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayLike<number> })
  .Float16Array;

/**
 * A float16 tensor's bits as a native `Float16Array` view (no copy) where the runtime has one; undefined
 * otherwise (Node 20: use {@link float16ToFloat32}).
 */
export function asFloat16Array(bits: Uint16Array): ArrayLike<number> | undefined {
  if (Float16ArrayCtor === undefined) return undefined;
  return new Float16ArrayCtor(bits.buffer as ArrayBuffer, bits.byteOffset, bits.length);
}

/**
 * Any tensor's values as float32 for arithmetic: a view for float32; exact widening for float16,
 * bfloat16, int8 and uint8; rounding for float64; 0/1 per dimension for binary.
 */
export function toFloat32(tensor: Tensor): Float32Array {
  switch (tensor.dtype) {
    case "float32":
      return tensor.data;
    case "float16":
      return float16ToFloat32(tensor.data);
    case "bfloat16":
      return bfloat16ToFloat32(tensor.data);
    case "float64":
      return float64ToFloat32(tensor.data);
    case "int8":
    case "uint8":
      return Float32Array.from(tensor.data);
    case "binary":
      return Float32Array.from(unpackBits(tensor.data, tensor.shape));
  }
}

/**
 * Converts float32 values to a tensor of `dtype` as a sender does (SPEC.md section 3): float16,
 * bfloat16 and binary by the spec's rules; float32 as is; float64 exactly. int8 and uint8 need
 * per-dimension ranges: asking for them here is an `invalid_field` error (use `quantize`).
 */
export function fromFloat32<D extends DType>(values: Float32Array, shape: readonly [number, number], dtype: D): Tensor<D> {
  const [n, d] = checkShape(shape);
  if (dtype !== "binary" && values.length !== n * d) {
    throw new DensewireError("shape_mismatch", `${values.length} values do not make a (${n}, ${d}) tensor`, { field: "data" });
  }
  let data;
  switch (dtype as DType) {
    case "float32":
      data = values;
      break;
    case "float16":
      data = float32ToFloat16(values);
      break;
    case "bfloat16":
      data = float32ToBfloat16(values);
      break;
    case "float64":
      data = allocData("float64", values.length);
      data.set(values);
      break;
    case "binary":
      data = float32ToBinary(values, [n, d]);
      break;
    default:
      throw new DensewireError("invalid_field", `float32 values are not converted to ${dtype} (carried as given only)`, { field: "dtype" });
  }
  return makeTensor(dtype, [n, d], data as never);
}
