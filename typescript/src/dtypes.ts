/**
 * Dtypes, byte orders and the columnar {@link Tensor} type (SPEC.md sections 1, 2 and 4), and the
 * zero-copy views every decoder returns.
 *
 * A tensor is a row-major (n, d) matrix held in one typed array:
 *
 * | dtype      | `data`         | notes |
 * |------------|----------------|-------|
 * | `float32`  | `Float32Array` | |
 * | `float64`  | `Float64Array` | |
 * | `float16`  | `Uint16Array`  | the IEEE binary16 bits; widen with `float16ToFloat32` |
 * | `bfloat16` | `Uint16Array`  | the bfloat16 bits; widen with `bfloat16ToFloat32` |
 * | `int8`     | `Int8Array`    | |
 * | `uint8`    | `Uint8Array`   | |
 * | `binary`   | `Uint8Array`   | `n * ceil(d / 8)` packed bytes, MSB first; `unpackBits` |
 */
import { DensewireError } from "./errors.js";

/** The dtype names of SPEC.md section 2: exact, lowercase. */
export type DType = "float32" | "float16" | "bfloat16" | "float64" | "int8" | "uint8" | "binary";

/** Byte order names of SPEC.md section 4. */
export type ByteOrder = "little" | "big";

/** The typed array holding each dtype's items. */
export interface DTypeArrays {
  float32: Float32Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  float64: Float64Array;
  int8: Int8Array;
  uint8: Uint8Array;
  binary: Uint8Array;
}

/** Any of the typed arrays a tensor's `data` can be. */
export type TensorData = DTypeArrays[DType];

/**
 * A row-major (n, d) matrix of one dtype. `Tensor` (without a parameter) is a union discriminated by
 * `dtype`, so `if (t.dtype === "float32") t.data` is a `Float32Array`.
 */
export type Tensor<D extends DType = DType> = D extends DType
  ? { dtype: D; shape: [n: number, d: number]; data: DTypeArrays[D] }
  : never;

/** Token counts of an embeddings response. */
export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
}

/**
 * Reads a decoded `usage` map (JSON envelope, MessagePack), as every library does: absent or null is
 * no usage; otherwise it must be a map (`invalid_field` on `usage`) whose `prompt_tokens` and
 * `total_tokens` are integers from 0 to 2^53 - 1 (`invalid_field` on `usage.prompt_tokens` /
 * `usage.total_tokens`, also for a null count); an absent count is 0 (SPEC.md sections 6.2 and 8).
 */
export function parseUsage(value: unknown): Usage | undefined {
  if (value === undefined || value === null) return undefined;
  const proto = typeof value === "object" ? Object.getPrototypeOf(value) : undefined;
  if (proto !== Object.prototype && proto !== null) {
    throw new DensewireError("invalid_field", `must be a map of token counts, got ${describe(value)}`, { field: "usage" });
  }
  const map = value as Record<string, unknown>;
  const count = (key: "prompt_tokens" | "total_tokens"): number => {
    const v = Object.prototype.hasOwnProperty.call(map, key) ? map[key] : undefined;
    if (v === undefined) return 0;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return v;
    if (typeof v === "bigint" && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
    throw new DensewireError("invalid_field", `must be a non-negative integer, got ${describe(v)}`, { field: `usage.${key}` });
  };
  return { prompt_tokens: count("prompt_tokens"), total_tokens: count("total_tokens") };
}

/**
 * What a decoder returns: the tensor and, for embeddings responses, the model id, usage and, for int8
 * and uint8 rows a server quantized, the id of the quantization ranges (`GET /v1/quantization/{id}`;
 * `dequantize` turns the codes back into float32).
 */
export type Embeddings<D extends DType = DType> = Tensor<D> & {
  model?: string | undefined;
  usage?: Usage | undefined;
  quantization?: string | undefined;
};

interface DTypeInfo {
  /** bytes per item; binary counts bytes of packed bits */
  readonly itemBytes: number;
  /** the Protobuf enum value (SPEC.md section 2) */
  readonly protobuf: number;
}

/** Per-dtype facts of SPEC.md section 2. */
export const DTYPES: Readonly<Record<DType, DTypeInfo>> = Object.freeze({
  float32: { itemBytes: 4, protobuf: 1 },
  float16: { itemBytes: 2, protobuf: 2 },
  bfloat16: { itemBytes: 2, protobuf: 3 },
  float64: { itemBytes: 8, protobuf: 4 },
  int8: { itemBytes: 1, protobuf: 5 },
  uint8: { itemBytes: 1, protobuf: 6 },
  binary: { itemBytes: 1, protobuf: 7 },
});

/** The dtype names in Protobuf enum order. */
export const DTYPE_NAMES: readonly DType[] = Object.freeze([
  "float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary",
] as DType[]);

/** True if `name` is a dtype name of SPEC.md section 2 (case-sensitive). */
export function isDType(name: unknown): name is DType {
  return typeof name === "string" && Object.prototype.hasOwnProperty.call(DTYPES, name);
}

/** Checks a dtype name: `unknown_dtype` on `field` for any other string, `invalid_field` for a non-string. */
export function parseDType(name: unknown, field = "dtype"): DType {
  if (isDType(name)) return name;
  if (typeof name !== "string") throw new DensewireError("invalid_field", `must be a dtype name, got ${describe(name)}`, { field });
  throw new DensewireError("unknown_dtype", `unknown dtype ${JSON.stringify(name)} (expected one of ${DTYPE_NAMES.join(", ")})`, { field });
}

/** Checks a byte order name: `invalid_field` on `field` for anything but `little` and `big`. */
export function parseByteOrder(name: unknown, field = "byteorder"): ByteOrder {
  if (name === "little" || name === "big") return name;
  throw new DensewireError("invalid_field", `must be "little" or "big", got ${describe(name)}`, { field });
}

/** Bytes of one row: `ceil(d / 8)` for binary, `d * itemBytes` otherwise. */
export function rowBytes(dtype: DType, d: number): number {
  return dtype === "binary" ? Math.ceil(d / 8) : d * DTYPES[dtype].itemBytes;
}

/** Items in `data` of an (n, d) tensor: `n * d`, or `n * ceil(d / 8)` packed bytes for binary. */
export function itemCount(dtype: DType, n: number, d: number): number {
  return dtype === "binary" ? n * Math.ceil(d / 8) : n * d;
}

/** True on little-endian hosts (all mainstream JS engines). */
export const LITTLE_ENDIAN_HOST: boolean = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const ARRAY_TYPES = {
  float32: Float32Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  binary: Uint8Array,
} as const;

/** A new zero-filled typed array of `count` items for `dtype`. */
export function allocData<D extends DType>(dtype: D, count: number): DTypeArrays[D] {
  return new ARRAY_TYPES[dtype](count) as DTypeArrays[D];
}

/**
 * The items of `bytes` as the dtype's typed array.
 *
 * - Little-endian data on a little-endian host, with `bytes.byteOffset` a multiple of the item size
 *   (always true for 1-byte dtypes): a **view** over the same memory, no copy.
 * - Unaligned little-endian data: **one copy** (`bytes.slice()`) into a fresh, aligned buffer.
 * - Big-endian data: each item's bytes are swapped (integer moves through a DataView, so NaN payloads
 *   survive) in place when `owned` is true (the caller's fresh buffer, as Base64 decoding gives),
 *   otherwise into a copy.
 *
 * `bytes.length` must already be `count * itemBytes`.
 */
export function viewAs<D extends DType>(bytes: Uint8Array, dtype: D, byteorder: ByteOrder = "little", owned = false): DTypeArrays[D] {
  const size = DTYPES[dtype].itemBytes;
  const Ctor = ARRAY_TYPES[dtype];
  const count = bytes.length / size;
  const needSwap = size > 1 && (byteorder === "little") !== LITTLE_ENDIAN_HOST;
  let src = bytes;
  if (needSwap) {
    if (!owned || bytes.byteOffset % size !== 0) src = bytes.slice();
    swapBytes(src, size);
  } else if (bytes.byteOffset % size !== 0) {
    src = bytes.slice();
  }
  return new Ctor(src.buffer as ArrayBuffer, src.byteOffset, count) as DTypeArrays[D];
}

/** The bytes of a tensor's data in the given byte order: a view when no swap is needed, else a copy. */
export function bytesOf(data: TensorData, itemBytes: number, byteorder: ByteOrder = "little"): Uint8Array {
  const view = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  if (itemBytes === 1 || (byteorder === "little") === LITTLE_ENDIAN_HOST) return view;
  const copy = view.slice();
  swapBytes(copy, itemBytes);
  return copy;
}

/** Reverses the bytes of each `size`-byte item of `bytes` in place (size 2, 4 or 8). */
export function swapBytes(bytes: Uint8Array, size: number): void {
  const n = bytes.length - (bytes.length % size);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (size === 2) {
    for (let i = 0; i < n; i += 2) dv.setUint16(i, dv.getUint16(i, true), false);
  } else if (size === 4) {
    for (let i = 0; i < n; i += 4) dv.setUint32(i, dv.getUint32(i, true), false);
  } else if (size === 8) {
    for (let i = 0; i < n; i += 8) {
      const lo = dv.getUint32(i, true);
      const hi = dv.getUint32(i + 4, true);
      dv.setUint32(i, hi, false);
      dv.setUint32(i + 4, lo, false);
    }
  }
}

/**
 * Builds a tensor, checking that `data` is the dtype's typed array and holds exactly
 * `n * row_bytes(dtype, d)` bytes (`length_mismatch` otherwise, SPEC.md section 1).
 */
export function makeTensor<D extends DType>(dtype: D, shape: readonly [number, number] | readonly number[], data: DTypeArrays[D]): Tensor<D> {
  parseDType(dtype);
  const [n, d] = checkShape(shape);
  const Ctor = ARRAY_TYPES[dtype];
  if (!(data instanceof Ctor)) {
    throw new DensewireError("invalid_field", `data for dtype ${dtype} must be a ${Ctor.name}, got ${describe(data)}`, { field: "data" });
  }
  checkLength(data.byteLength, n * rowBytes(dtype, d), "data");
  return { dtype, shape: [n, d], data } as unknown as Tensor<D>;
}

/** Checks an (n, d) shape of two non-negative safe integers (`invalid_field` on `field`). */
export function checkShape(shape: unknown, field = "shape"): [number, number] {
  if (!Array.isArray(shape) || shape.length !== 2 || !shape.every((x) => Number.isSafeInteger(x) && x >= 0)) {
    throw new DensewireError("invalid_field", `must be two non-negative integers [n, d], got ${describe(shape)}`, { field });
  }
  return [shape[0], shape[1]];
}

/** `length_mismatch` unless `actual === expected`, at offset `min(actual, expected)` (SPEC.md section 5). */
export function checkLength(actual: number, expected: number, field?: string): void {
  if (actual !== expected) {
    throw new DensewireError(
      "length_mismatch",
      `${actual} byte${actual === 1 ? "" : "s"} of data where the shape needs ${expected} (${actual < expected ? "missing" : "in excess"} from byte ${Math.min(actual, expected)})`,
      { offset: Math.min(actual, expected), field },
    );
  }
}

/** One row of a tensor as a view (no copy): `d` items, or `ceil(d / 8)` packed bytes for binary. */
export function row<D extends DType>(tensor: Tensor<D>, i: number): DTypeArrays[D] {
  const [n, d] = tensor.shape;
  if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`row ${i} out of range [0, ${n})`);
  const w = tensor.dtype === "binary" ? Math.ceil(d / 8) : d;
  return tensor.data.subarray(i * w, (i + 1) * w) as DTypeArrays[D];
}

/** A short description of a value for error messages. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.length <= 4 ? JSON.stringify(value) : `an array of ${value.length}`;
  if (ArrayBuffer.isView(value)) return value.constructor.name;
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "..." : value);
  if (typeof value === "object") return "an object";
  return String(value);
}

/**
 * SPEC.md 20: a tensor body says no kind. `present` is whether the body has the marker (`field`: the key
 * `kind`, the header `Densewire-Kind`, the metadata `densewire.kind`), whatever its value.
 */
export function checkNoKind(present: boolean, value: unknown, field: string): void {
  if (present) {
    throw new DensewireError("invalid_field", `a tensor body says no kind, this one says ${describe(value)}: decode it as that kind`, { field });
  }
}
