/**
 * Quantized embeddings: int8 and uint8 rows with per-dimension ranges published by the server.
 *
 * A server that answers `dtype: "int8"` or `"uint8"` quantizes each dimension `j` of a float32 vector
 * against a range `[lower[j], upper[j]]` calibrated once per model, names the ranges by a
 * quantization id in every format (JSON `quantization`, the raw header `Densewire-Quantization`,
 * MessagePack `quantization`, Protobuf `EmbeddingsResponse.quantization`, Arrow schema metadata
 * `densewire.quantization`; the decoders put it in {@link Embeddings.quantization}), and publishes
 * the ranges at `GET /v1/quantization/{id}` (and in `GET /v1/models`).
 *
 * The rule, exact in every implementation: all arithmetic in IEEE binary64 (a JS number) from the
 * float32 values widened exactly; `step = (upper - lower) / 255`;
 * - quantize: `u = floor((x - lower) / step)` clamped to [0, 255]; NaN gives 0; when `step == 0`,
 *   `u = 255` if `x > lower` else 0. A `uint8` item is `u`, an `int8` item is `u - 128`.
 * - dequantize: `float32(lower + (u + 0.5) * step)` (ties to even), or `lower` when `step == 0`.
 */
import { base64ToBytes } from "./base64.js";
import { type Embeddings, type Tensor, checkShape, describe } from "./dtypes.js";
import { DensewireError } from "./errors.js";

/** The dtypes quantized with published ranges. */
export type QuantizedDType = "int8" | "uint8";

/** Per-dimension ranges: `d` float32 values each. */
export interface QuantizationRanges {
  lower: Float32Array;
  upper: Float32Array;
}

/** The calibration set the server measured the ranges on. */
export interface QuantizationCalibration {
  name: string;
  texts: number;
  sha256: string;
}

/**
 * The quantization object a server publishes at `GET /v1/quantization/{id}` (and in `GET /v1/models`),
 * with `lower` and `upper` decoded from their Base64 float32 little-endian form.
 */
export interface Quantization extends QuantizationRanges {
  /** First 16 hex digits of sha256(lower LE bytes || upper LE bytes || decimal d): {@link quantizationId}. */
  id: string;
  /** `minmax-per-dimension`, the only method of the spec. */
  method: string;
  /** `d`: the number of dimensions (the length of `lower` and `upper`). */
  dimensions: number;
  calibration?: QuantizationCalibration | undefined;
  /** The model the ranges were calibrated for (informative). */
  model?: string | undefined;
}

/** The one quantization method of the spec. */
export const QUANTIZATION_METHOD = "minmax-per-dimension";

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function float32Array(v: ArrayLike<number>): Float32Array {
  return v instanceof Float32Array ? v : Float32Array.from(v);
}

/** Checks a pair of ranges (equal lengths, finite, lower <= upper), naming the first bad item. */
function checkRanges(lower: Float32Array, upper: Float32Array, d: number, prefix = ""): void {
  if (lower.length !== d || upper.length !== d) {
    const field = lower.length !== d ? "lower" : "upper";
    throw new DensewireError("shape_mismatch", `${field} has ${(field === "lower" ? lower : upper).length} values, the rows have ${d} dimensions`, {
      field: prefix + field,
    });
  }
  for (let j = 0; j < d; j++) {
    const lo = lower[j]!;
    const hi = upper[j]!;
    if (!Number.isFinite(lo)) throw new DensewireError("invalid_field", `must be finite, got ${lo}`, { field: `${prefix}lower[${j}]` });
    if (!Number.isFinite(hi)) throw new DensewireError("invalid_field", `must be finite, got ${hi}`, { field: `${prefix}upper[${j}]` });
    if (lo > hi) throw new DensewireError("invalid_field", `${hi} is below lower[${j}] = ${lo}`, { field: `${prefix}upper[${j}]` });
  }
}

function rangesOf(a: QuantizationRanges | ArrayLike<number>, b: ArrayLike<number> | undefined): [Float32Array, Float32Array] {
  if (b === undefined) {
    const r = a as QuantizationRanges;
    if (!isObject(r) || r.lower === undefined || r.upper === undefined) throw new TypeError("pass lower and upper, or an object with both");
    return [float32Array(r.lower), float32Array(r.upper)];
  }
  return [float32Array(a as ArrayLike<number>), float32Array(b)];
}

/** `(upper - lower) / 255` per dimension, in binary64. */
function steps(lower: Float32Array, upper: Float32Array): Float64Array {
  const step = new Float64Array(lower.length);
  for (let j = 0; j < lower.length; j++) step[j] = (upper[j]! - lower[j]!) / 255;
  return step;
}

/**
 * Dequantizes int8 or uint8 codes to float32 with the ranges they were quantized with:
 * `dequantize(codes, lower, upper)` or `dequantize(codes, quantization)`. Each item becomes
 * `float32(lower[j] + (u + 0.5) * step[j])` (u = the uint8 item, or the int8 item + 128), or
 * `lower[j]` where `lower[j] == upper[j]`. The result keeps the codes' `model` and `usage` (not
 * their `quantization` id: it names the ranges of codes, and the result is float32).
 *
 * Errors (SPEC.md section 17.3): `invalid_field` on `dtype` for other dtypes; `shape_mismatch` on
 * `lower`/`upper` when they do not have `d` values; `invalid_field` on `lower[j]` (not finite) or
 * `upper[j]` (not finite, or below `lower[j]`) for the first such `j`.
 */
export function dequantize(codes: Tensor | Embeddings, ranges: QuantizationRanges): Embeddings<"float32">;
export function dequantize(codes: Tensor | Embeddings, lower: ArrayLike<number>, upper: ArrayLike<number>): Embeddings<"float32">;
export function dequantize(codes: Tensor | Embeddings, a: QuantizationRanges | ArrayLike<number>, b?: ArrayLike<number>): Embeddings<"float32"> {
  if (codes.dtype !== "int8" && codes.dtype !== "uint8") {
    throw new DensewireError("invalid_field", `dequantize takes int8 or uint8 codes, got ${describe(codes.dtype)}`, { field: "dtype" });
  }
  const [n, d] = checkShape(codes.shape);
  const [lower, upper] = rangesOf(a, b);
  checkRanges(lower, upper, d);
  const data = codes.data;
  if (data.length !== n * d) {
    throw new DensewireError("length_mismatch", `${data.length} codes where the shape needs ${n * d}`, { offset: Math.min(data.length, n * d), field: "data" });
  }
  const step = steps(lower, upper);
  const lo64 = Float64Array.from(lower);
  const out = new Float32Array(n * d);
  const offset = codes.dtype === "int8" ? 128 : 0;
  for (let i = 0, k = 0; i < n; i++) {
    for (let j = 0; j < d; j++, k++) {
      const st = step[j]!;
      // the store rounds the binary64 value to float32, ties to even; step 0 gives lower itself (-0.0 too)
      out[k] = st === 0 ? lo64[j]! : lo64[j]! + (data[k]! + offset + 0.5) * st;
    }
  }
  const result: Embeddings<"float32"> = { dtype: "float32", shape: [n, d], data: out };
  const meta = codes as Embeddings;
  if (meta.model !== undefined) result.model = meta.model;
  if (meta.usage !== undefined) result.usage = meta.usage;
  return result;
}

/**
 * Quantizes float32 rows to int8 or uint8 codes against per-dimension ranges, by the spec's rule
 * (what a densewire server does). `quantize(tensor, lower, upper, "int8")` or
 * `quantize(tensor, quantization, "int8")`.
 *
 * Errors: `invalid_field` on `dtype` (the tensor must be float32; the target int8 or uint8), and the
 * range errors of {@link dequantize}.
 */
export function quantize<Q extends QuantizedDType>(tensor: Tensor, ranges: QuantizationRanges, dtype: Q): Tensor<Q>;
export function quantize<Q extends QuantizedDType>(tensor: Tensor, lower: ArrayLike<number>, upper: ArrayLike<number>, dtype: Q): Tensor<Q>;
export function quantize(tensor: Tensor, a: QuantizationRanges | ArrayLike<number>, b: ArrayLike<number> | QuantizedDType, c?: QuantizedDType): Tensor {
  const dtype = (typeof b === "string" ? b : c) as unknown;
  if (dtype !== "int8" && dtype !== "uint8") throw new DensewireError("invalid_field", `must be "int8" or "uint8", got ${describe(dtype)}`, { field: "dtype" });
  if (tensor.dtype !== "float32") {
    throw new DensewireError("invalid_field", `quantize takes float32 rows, got ${describe(tensor.dtype)} (convert with toFloat32 first)`, { field: "dtype" });
  }
  const [n, d] = checkShape(tensor.shape);
  const [lower, upper] = rangesOf(a, typeof b === "string" ? undefined : b);
  checkRanges(lower, upper, d);
  const x = tensor.data;
  if (x.length !== n * d) {
    throw new DensewireError("length_mismatch", `${x.length} values where the shape needs ${n * d}`, { offset: Math.min(x.length, n * d), field: "data" });
  }
  const step = steps(lower, upper);
  const codes = new Uint8Array(n * d);
  for (let i = 0, k = 0; i < n; i++) {
    for (let j = 0; j < d; j++, k++) {
      const v = x[k]!;
      const lo = lower[j]!;
      const st = step[j]!;
      let u: number;
      if (st === 0) {
        u = v > lo ? 255 : 0; // NaN compares false: 0
      } else {
        u = Math.floor((v - lo) / st); // NaN stays NaN; +-Infinity stay infinite
        u = u > 255 ? 255 : u >= 0 ? u : 0; // NaN fails both comparisons: 0
      }
      codes[k] = u;
    }
  }
  if (dtype === "uint8") return { dtype, shape: [n, d], data: codes };
  const signed = new Int8Array(codes.buffer);
  for (let k = 0; k < signed.length; k++) signed[k] = codes[k]! - 128;
  return { dtype, shape: [n, d], data: signed };
}

/**
 * The quantization id of a pair of ranges: the first 16 hex digits of
 * sha256(lower as float32 little-endian bytes || upper likewise || d in decimal ASCII).
 */
export function quantizationId(lower: ArrayLike<number>, upper: ArrayLike<number>): string {
  const lo = float32Array(lower);
  const hi = float32Array(upper);
  if (lo.length !== hi.length) throw new DensewireError("shape_mismatch", `lower has ${lo.length} values, upper ${hi.length}`, { field: "upper" });
  const d = lo.length;
  const digits = String(d);
  const bytes = new Uint8Array(8 * d + digits.length);
  bytes.set(littleEndianBytes(lo), 0); // the exact bits, NaN payloads included
  bytes.set(littleEndianBytes(hi), 4 * d);
  for (let i = 0; i < digits.length; i++) bytes[8 * d + i] = digits.charCodeAt(i);
  return sha256Hex(bytes).slice(0, 16);
}

function littleEndianBytes(a: Float32Array): Uint8Array {
  const bits = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const out = new Uint8Array(4 * a.length);
  for (let j = 0; j < a.length; j++) {
    const b = bits[j]!;
    out[4 * j] = b & 0xff;
    out[4 * j + 1] = (b >>> 8) & 0xff;
    out[4 * j + 2] = (b >>> 16) & 0xff;
    out[4 * j + 3] = b >>> 24;
  }
  return out;
}

/**
 * Reads the quantization object a server publishes (`GET /v1/quantization/{id}`, or the
 * `quantization` of a `GET /v1/models` item; a parsed value or its JSON text) and checks it as SPEC.md
 * section 17.6 says, the first failure being the error: the keys `id`, `method`
 * (`minmax-per-dimension`), `dimensions`, `lower`, `upper` are there with their types
 * (`invalid_field` on the key); `lower` then `upper` are strict Base64 of `4 * dimensions` bytes
 * (`invalid_base64`, `length_mismatch`); the ranges are finite with `lower <= upper` (`invalid_field`
 * on `lower[j]`/`upper[j]`); `id` is their {@link quantizationId} (`invalid_field` on `id`).
 * `prefix` is put before every field name (say `"data[0].quantization."` for a models listing).
 */
export function parseQuantization(doc: unknown, prefix = ""): Quantization {
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch (e) {
      throw new DensewireError("malformed", `not valid JSON: ${(e as Error).message}`, {}, { cause: e });
    }
  }
  if (!isObject(doc)) throw new DensewireError("malformed", `the quantization object must be a JSON object, got ${describe(doc)}`);
  const str = (key: string): string => {
    const v = doc[key];
    if (typeof v !== "string") throw new DensewireError("invalid_field", v === undefined ? "missing" : `must be a string, got ${describe(v)}`, { field: prefix + key });
    return v;
  };
  const id = str("id");
  const method = str("method");
  if (method !== QUANTIZATION_METHOD) {
    throw new DensewireError("invalid_field", `unknown method ${JSON.stringify(method)} (this library knows ${QUANTIZATION_METHOD})`, { field: prefix + "method" });
  }
  const dims = doc["dimensions"];
  if (!Number.isSafeInteger(dims) || (dims as number) < 0) {
    throw new DensewireError("invalid_field", dims === undefined ? "missing" : `must be a non-negative integer, got ${describe(dims)}`, {
      field: prefix + "dimensions",
    });
  }
  const d = dims as number;
  const texts = { lower: str("lower"), upper: str("upper") };
  const values = (key: "lower" | "upper"): Float32Array => {
    const bytes = base64ToBytes(texts[key], prefix + key);
    if (bytes.length !== 4 * d) {
      throw new DensewireError("length_mismatch", `${bytes.length} bytes where ${d} float32 values need ${4 * d}`, {
        offset: Math.min(bytes.length, 4 * d),
        field: prefix + key,
      });
    }
    const out = new Float32Array(d);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const bits = new Uint32Array(out.buffer);
    for (let j = 0; j < d; j++) bits[j] = dv.getUint32(4 * j, true);
    return out;
  };
  const lower = values("lower");
  const upper = values("upper");
  checkRanges(lower, upper, d, prefix);
  const actual = quantizationId(lower, upper);
  if (actual !== id) throw new DensewireError("invalid_field", `the ranges have id ${actual}, not ${JSON.stringify(id)}`, { field: prefix + "id" });
  const result: Quantization = { id, method, dimensions: d, lower, upper };
  const cal = doc["calibration"];
  if (isObject(cal) && typeof cal["name"] === "string" && typeof cal["texts"] === "number" && typeof cal["sha256"] === "string") {
    result.calibration = { name: cal["name"], texts: cal["texts"], sha256: cal["sha256"] };
  }
  if (typeof doc["model"] === "string") result.model = doc["model"];
  return result;
}

/**
 * The quantization id a decoder read (`field` names where): undefined when absent (null or
 * undefined), else it must be a string (`invalid_field` otherwise).
 */
export function readQuantizationId(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new DensewireError("invalid_field", `must be a string, got ${describe(value)}`, { field });
  return value;
}

/** What an encoder writes: the id when given (a string), whatever the dtype (SPEC.md section 17.5). */
export function checkQuantization(id: unknown): string | undefined {
  if (id === undefined || id === null) return undefined;
  if (typeof id !== "string") throw new DensewireError("invalid_field", `must be a string, got ${describe(id)}`, { field: "quantization" });
  return id;
}

/**
 * Packed sign bits (densewire `binary`, Cohere's and sentence-transformers' `ubinary`) as Cohere's and
 * sentence-transformers' `binary`: each byte as int8, `byte - 128` (SPEC.md section 17.1). Takes a
 * binary tensor or its packed bytes.
 */
export function cohereBinary(packed: Tensor | Uint8Array): Int8Array {
  let bytes: Uint8Array;
  if (packed instanceof Uint8Array) {
    bytes = packed;
  } else {
    if (packed.dtype !== "binary") throw new DensewireError("invalid_field", `needs a binary tensor, not ${describe(packed.dtype)}`, { field: "dtype" });
    bytes = packed.data;
  }
  const out = new Int8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) out[i] = bytes[i]! - 128;
  return out;
}

/** Cohere's `binary` int8 values (`byte - 128`) back to the packed bytes; `invalid_field` outside -128..127. */
export function fromCohereBinary(values: Int8Array | ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isInteger(v) || v < -128 || v > 127) throw new DensewireError("invalid_field", `Cohere binary values are -128..127, got ${v}`, { field: `binary[${i}]` });
    out[i] = v + 128;
  }
  return out;
}

// ------------------------------------------------------------------------------------------ sha256
// FIPS 180-4 SHA-256 (synchronous: WebCrypto's digest is async, and absent from pages served over
// plain http); used for the 16-hex-digit quantization id only.

const K = /*@__PURE__*/ Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** The SHA-256 digest of `bytes` as 64 lowercase hex digits. */
export function sha256Hex(bytes: Uint8Array): string {
  const len = bytes.length;
  const blocks = Math.ceil((len + 9) / 64);
  const msg = new Uint8Array(blocks * 64);
  msg.set(bytes);
  msg[len] = 0x80;
  const dv = new DataView(msg.buffer);
  dv.setUint32(msg.length - 8, Math.floor(len / 0x20000000), false); // bit length, high word
  dv.setUint32(msg.length - 4, (len * 8) >>> 0, false);
  const h = Uint32Array.from([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  for (let off = 0; off < msg.length; off += 64) {
    for (let t = 0; t < 16; t++) w[t] = dv.getUint32(off + 4 * t, false);
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15]!;
      const b = w[t - 2]!;
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[t] = (w[t - 16]! + s0 + w[t - 7]! + s1) | 0;
    }
    let a = h[0]!, b = h[1]!, c = h[2]!, d = h[3]!, e = h[4]!, f = h[5]!, g = h[6]!, hh = h[7]!;
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + ch + K[t]! + w[t]!) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0]! + a) | 0;
    h[1] = (h[1]! + b) | 0;
    h[2] = (h[2]! + c) | 0;
    h[3] = (h[3]! + d) | 0;
    h[4] = (h[4]! + e) | 0;
    h[5] = (h[5]! + f) | 0;
    h[6] = (h[6]! + g) | 0;
    h[7] = (h[7]! + hh) | 0;
  }
  let hex = "";
  for (let i = 0; i < 8; i++) hex += h[i]!.toString(16).padStart(8, "0");
  return hex;
}
