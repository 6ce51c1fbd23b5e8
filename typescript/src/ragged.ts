/**
 * Ragged and sparse tensors (SPEC.md section 20, "Ragged and sparse tensors"): their types, the checks
 * every format shares (offsets, indices), views of one matrix or vector over the one buffer, and the
 * raw body (20.4). The other formats are in json.ts / msgpack.ts / protobuf.ts / arrow.ts beside the
 * plain tensor's.
 *
 * A ragged tensor is `n` matrices of `m_i x d` whose rows are one `(N, d)` typed array and whose
 * `offsets` (`n + 1` uint32) say where each starts: {@link raggedMatrix} gives matrix `i` as a
 * subarray of that one buffer, no copy. A sparse tensor is `n` vectors over a vocabulary of `V`, their
 * strictly ascending `indices` (uint32) and `values` each one array, split by `offsets` likewise.
 */
import { type DType, type Tensor, type TensorData, type Usage, DTYPES, LITTLE_ENDIAN_HOST, describe, parseDType, rowBytes, viewAs } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { type HeadersInput, getHeader } from "./raw.js";

/** The dtypes of a sparse tensor's values (20.2). */
export type SparseDType = "float32" | "float16" | "bfloat16" | "float64";

/** `n` matrices of `m_i x d` over one buffer (20.1): `data` holds the `N = offsets[n]` rows. */
export interface RaggedTensor {
  kind: "ragged";
  dtype: DType;
  /** `[n, d]` */
  shape: [n: number, d: number];
  /** `n + 1` row offsets: matrix `i` is rows `offsets[i]` to `offsets[i + 1] - 1` */
  offsets: Uint32Array;
  /** the `N` rows as one typed array (`N * d` items; `N * ceil(d / 8)` bytes for binary) */
  data: TensorData;
  model?: string | undefined;
  usage?: Usage | undefined;
}

/** `n` sparse vectors over a vocabulary of `V` (20.2). */
export interface SparseTensor {
  kind: "sparse";
  dtype: SparseDType;
  /** `[n, V]` */
  shape: [n: number, V: number];
  /** `n + 1` entry offsets: vector `i` is entries `offsets[i]` to `offsets[i + 1] - 1` */
  offsets: Uint32Array;
  /** the `K = offsets[n]` indices, strictly ascending within each vector, each below `V` */
  indices: Uint32Array;
  /** the `K` values */
  data: TensorData;
  model?: string | undefined;
  usage?: Usage | undefined;
}

const MAX_VOCABULARY = 2 ** 32;

/** Items per row in a ragged tensor's `data`: `d`, or the packed bytes of a binary row. */
export function raggedWidth(dtype: DType, d: number): number {
  return dtype === "binary" ? rowBytes(dtype, d) : d;
}

/** Matrix `i` of a ragged tensor as a Tensor whose data is a subarray of `t.data` (no copy). */
export function raggedMatrix(t: RaggedTensor, i: number): Tensor {
  const n = t.shape[0];
  if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`matrix ${i} of a ragged tensor of ${n}`);
  const w = raggedWidth(t.dtype, t.shape[1]);
  const start = t.offsets[i]!;
  const end = t.offsets[i + 1]!;
  return { dtype: t.dtype, shape: [end - start, t.shape[1]], data: t.data.subarray(start * w, end * w) } as Tensor;
}

/** Vector `i` of a sparse tensor: its indices and values as subarrays (no copy). */
export function sparseVector(t: SparseTensor, i: number): { indices: Uint32Array; values: TensorData } {
  const n = t.shape[0];
  if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`vector ${i} of a sparse tensor of ${n}`);
  const start = t.offsets[i]!;
  const end = t.offsets[i + 1]!;
  return { indices: t.indices.subarray(start, end), values: t.data.subarray(start, end) };
}

/** A sparse tensor's dtype checked: float dtypes only (`invalid_field` on `field` otherwise). */
export function parseSparseDType(name: unknown, field = "dtype"): SparseDType {
  const dtype = parseDType(name, field);
  if (dtype !== "float32" && dtype !== "float16" && dtype !== "bfloat16" && dtype !== "float64") {
    throw new DensewireError("invalid_field", `a sparse tensor's values are float32, float16, bfloat16 or float64, not ${dtype}`, { field });
  }
  return dtype;
}

/** A vocabulary size checked: an integer from 1 to 2^32 (`invalid_field` on `field`). */
export function checkVocabulary(v: unknown, field: string): number {
  if (!Number.isSafeInteger(v) || (v as number) < 1 || (v as number) > MAX_VOCABULARY) {
    throw new DensewireError("invalid_field", `the vocabulary size must be an integer from 1 to 2^32, got ${describe(v)}`, { field });
  }
  return v as number;
}

/** Little-endian uint32 bytes as a Uint32Array: a view when aligned on a little-endian host, else one copy. */
export function uint32s(bytes: Uint8Array): Uint32Array {
  if (LITTLE_ENDIAN_HOST && bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const out = new Uint32Array(bytes.length / 4);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = dv.getUint32(4 * i, true);
  return out;
}

/** A Uint32Array's little-endian bytes (a view on a little-endian host). */
export function uint32Bytes(a: Uint32Array): Uint8Array {
  if (LITTLE_ENDIAN_HOST) return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const out = new Uint8Array(a.byteLength);
  const dv = new DataView(out.buffer);
  a.forEach((x, i) => dv.setUint32(4 * i, x, true));
  return out;
}

/**
 * 20.1 checks 2 and 3 on the offsets' bytes of a batch of `n`: `4 (n + 1)` bytes (`length_mismatch`),
 * `offsets[0] = 0` and never decreasing (`invalid_field` at `base + 4k`, the first entry that breaks it).
 */
export function checkOffsets(bytes: Uint8Array, n: number, base = 0, field = "offsets"): Uint32Array {
  const expected = 4 * (n + 1);
  if (bytes.length !== expected) {
    throw new DensewireError("length_mismatch", `${bytes.length} bytes of offsets where a batch of ${n} needs ${expected}`, { offset: base + Math.min(bytes.length, expected), field });
  }
  return checkOffsetValues(uint32s(bytes), base, field);
}

/** Check 3 of 20.1 on decoded offsets. */
export function checkOffsetValues(offsets: Uint32Array, base = 0, field = "offsets"): Uint32Array {
  if (offsets[0] !== 0) throw new DensewireError("invalid_field", `the first offset must be 0, got ${offsets[0]}`, { offset: base, field });
  for (let k = 1; k < offsets.length; k++) {
    if (offsets[k]! < offsets[k - 1]!) {
      throw new DensewireError("invalid_field", `offset ${k} (${offsets[k]}) is below offset ${k - 1} (${offsets[k - 1]})`, { offset: base + 4 * k, field });
    }
  }
  return offsets;
}

/**
 * 20.2 check 5: each index below `V` and above the one before it in the same vector (`invalid_field`
 * at `base + 4j`, `j` the first such entry).
 */
export function checkIndices(indices: Uint32Array, offsets: Uint32Array, v: number, base = 0, field = "indices", fieldOf?: (j: number) => string): void {
  let vec = 0;
  for (let j = 0; j < indices.length; j++) {
    while (offsets[vec + 1]! <= j) vec++;
    const x = indices[j]!;
    const where = { offset: fieldOf === undefined ? base + 4 * j : undefined, field: fieldOf === undefined ? field : fieldOf(j) };
    if (x >= v) throw new DensewireError("invalid_field", `index ${x} is not below the vocabulary size ${v}`, where);
    if (j > offsets[vec]! && x <= indices[j - 1]!) {
      throw new DensewireError("invalid_field", `index ${x} is not above the index before it (${indices[j - 1]}) in vector ${vec}`, where);
    }
  }
}

/** Checks the parts of a ragged tensor built by a caller (not decoded). */
export function makeRagged(dtype: DType, d: number, offsets: Uint32Array, data: TensorData): RaggedTensor {
  parseDType(dtype);
  checkOffsetValues(offsets);
  const rows = offsets[offsets.length - 1]!;
  const expected = rows * rowBytes(dtype, d);
  if (data.byteLength !== expected) {
    throw new DensewireError("length_mismatch", `${data.byteLength} bytes of rows where ${rows} rows need ${expected}`, { offset: Math.min(data.byteLength, expected), field: "data" });
  }
  return { kind: "ragged", dtype, shape: [offsets.length - 1, d], offsets, data };
}

/** Checks the parts of a sparse tensor built by a caller (not decoded). */
export function makeSparse(dtype: SparseDType, vocabulary: number, offsets: Uint32Array, indices: Uint32Array, data: TensorData): SparseTensor {
  parseSparseDType(dtype);
  checkVocabulary(vocabulary, "shape");
  checkOffsetValues(offsets);
  const k = offsets[offsets.length - 1]!;
  if (indices.length !== k) throw new DensewireError("length_mismatch", `${indices.length} indices where the offsets say ${k}`, { offset: 4 * Math.min(indices.length, k), field: "indices" });
  if (data.length !== k) throw new DensewireError("length_mismatch", `${data.length} values where the offsets say ${k}`, { offset: DTYPES[dtype].itemBytes * Math.min(data.length, k), field: "data" });
  checkIndices(indices, offsets, vocabulary);
  return { kind: "sparse", dtype, shape: [offsets.length - 1, vocabulary], offsets, indices, data };
}

// ------------------------------------------------------------------------- raw body (20.4)

const SHAPE = /^(0|[1-9][0-9]*),(0|[1-9][0-9]*)$/;
const COUNT = /^(0|[1-9][0-9]*)$/;
const pad8 = (x: number) => (x + 7) & ~7;

function rawHead(headers: HeadersInput, kind: "ragged" | "sparse"): { dtype: DType; n: number; d: number } {
  const k = getHeader(headers, "Densewire-Kind");
  if (k?.trim() !== kind) throw new DensewireError("invalid_field", k === undefined ? `missing (a ${kind} body says Densewire-Kind: ${kind})` : `must be ${kind}, got ${describe(k)}`, { field: "Densewire-Kind" });
  const dt = getHeader(headers, "Densewire-Dtype");
  if (dt === undefined) throw new DensewireError("invalid_field", "missing", { field: "Densewire-Dtype" });
  const dtype = kind === "sparse" ? parseSparseDType(dt.trim(), "Densewire-Dtype") : parseDType(dt.trim(), "Densewire-Dtype");
  const shape = getHeader(headers, "Densewire-Shape");
  const m = shape === undefined ? null : SHAPE.exec(shape.trim());
  const n = m === null ? NaN : Number(m[1]);
  const d = m === null ? NaN : Number(m[2]);
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(d) || (kind === "sparse" && (d < 1 || d > MAX_VOCABULARY))) {
    throw new DensewireError("invalid_field", `must be ${kind === "sparse" ? "n,V with V from 1 to 2^32" : "n,d"}, got ${describe(shape)}`, { field: "Densewire-Shape" });
  }
  const order = getHeader(headers, "Densewire-Byteorder");
  if (order !== undefined && order.trim() !== "little") throw new DensewireError("invalid_field", `must be little, got ${describe(order)}`, { field: "Densewire-Byteorder" });
  return { dtype, n, d };
}

function rawMeta(t: { model?: string | undefined; usage?: Usage | undefined }, headers: HeadersInput): void {
  const model = getHeader(headers, "Densewire-Model");
  if (model !== undefined) t.model = model;
  const pt = getHeader(headers, "Densewire-Prompt-Tokens");
  const tt = getHeader(headers, "Densewire-Total-Tokens");
  if (pt !== undefined || tt !== undefined) {
    const count = (v: string | undefined, name: string) => {
      if (v === undefined) return 0;
      if (!COUNT.test(v.trim()) || !Number.isSafeInteger(Number(v))) throw new DensewireError("invalid_field", `must be a decimal integer, got ${describe(v)}`, { field: name });
      return Number(v);
    };
    t.usage = { prompt_tokens: count(pt, "Densewire-Prompt-Tokens"), total_tokens: count(tt, "Densewire-Total-Tokens") };
  }
}

function rawOffsets(bytes: Uint8Array, n: number): Uint32Array {
  const size = 4 * (n + 1);
  if (bytes.length < size) throw new DensewireError("length_mismatch", `the body of ${bytes.length} bytes is shorter than the ${size} bytes of offsets`, { offset: bytes.length });
  return checkOffsets(bytes.subarray(0, size), n);
}

function bodyLength(actual: number, expected: number): void {
  if (actual !== expected) throw new DensewireError("length_mismatch", `a body of ${actual} bytes where its parts need ${expected}`, { offset: Math.min(actual, expected) });
}

/** Decodes a ragged raw body (20.4): the offsets, then the rows from the next 8-byte boundary; views over the body when aligned. */
export function decodeRaggedRaw(body: Uint8Array | ArrayBuffer, headers: HeadersInput): RaggedTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const { dtype, n, d } = rawHead(headers, "ragged");
  const offsets = rawOffsets(bytes, n);
  const start = pad8(4 * (n + 1));
  const rowsBytes = offsets[n]! * rowBytes(dtype, d);
  bodyLength(bytes.length, start + rowsBytes);
  const t: RaggedTensor = { kind: "ragged", dtype, shape: [n, d], offsets, data: viewAs(bytes.subarray(start, start + rowsBytes), dtype) };
  rawMeta(t, headers);
  return t;
}

/** Decodes a sparse raw body (20.4): offsets, indices and values, each from an 8-byte boundary. */
export function decodeSparseRaw(body: Uint8Array | ArrayBuffer, headers: HeadersInput): SparseTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const { dtype, n, d: v } = rawHead(headers, "sparse");
  const offsets = rawOffsets(bytes, n);
  const k = offsets[n]!;
  const indicesAt = pad8(4 * (n + 1));
  const valuesAt = indicesAt + pad8(4 * k);
  const valueBytes = k * DTYPES[dtype].itemBytes;
  bodyLength(bytes.length, valuesAt + valueBytes);
  const indices = uint32s(bytes.subarray(indicesAt, indicesAt + 4 * k));
  checkIndices(indices, offsets, v, indicesAt);
  const t: SparseTensor = { kind: "sparse", dtype: dtype as SparseDType, shape: [n, v], offsets, indices, data: viewAs(bytes.subarray(valuesAt, valuesAt + valueBytes), dtype) };
  rawMeta(t, headers);
  return t;
}

/** Options of the ragged and sparse encoders: an embeddings response's model and usage. */
export interface KindEncodeOptions {
  model?: string;
  usage?: Usage;
}

function rawHeaders(t: RaggedTensor | SparseTensor, options: KindEncodeOptions): Record<string, string> {
  const h: Record<string, string> = {
    "Densewire-Version": "1",
    "Densewire-Kind": t.kind,
    "Densewire-Dtype": t.dtype,
    "Densewire-Shape": `${t.shape[0]},${t.shape[1]}`,
    "Densewire-Byteorder": "little",
  };
  const model = options.model ?? t.model;
  const usage = options.usage ?? t.usage;
  if (model !== undefined) h["Densewire-Model"] = model;
  if (usage !== undefined) {
    h["Densewire-Prompt-Tokens"] = String(usage.prompt_tokens);
    h["Densewire-Total-Tokens"] = String(usage.total_tokens);
  }
  return h;
}

function concat(parts: Uint8Array[]): Uint8Array {
  // every part but the last padded with zeros to a multiple of 8 bytes
  const sizes = parts.map((p, i) => (i === parts.length - 1 ? p.length : pad8(p.length)));
  const out = new Uint8Array(sizes.reduce((a, b) => a + b, 0));
  let at = 0;
  parts.forEach((p, i) => {
    out.set(p, at);
    at += sizes[i]!;
  });
  return out;
}

/** The bytes of a typed array, little-endian (items swapped on a big-endian host). */
function leBytes(data: TensorData): Uint8Array {
  const view = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (LITTLE_ENDIAN_HOST || data.BYTES_PER_ELEMENT === 1) return view;
  throw new Error("big-endian hosts are not supported by the ragged encoders");
}

/** Encodes a ragged tensor as a raw body (20.4) and its headers. */
export function encodeRaggedRaw(t: RaggedTensor, options: KindEncodeOptions = {}): { body: Uint8Array; headers: Record<string, string> } {
  const rows = leBytes(t.data);
  const offsets = uint32Bytes(t.offsets);
  return { body: concat([offsets, rows]), headers: rawHeaders(t, options) };
}

/** Encodes a sparse tensor as a raw body (20.4) and its headers. */
export function encodeSparseRaw(t: SparseTensor, options: KindEncodeOptions = {}): { body: Uint8Array; headers: Record<string, string> } {
  return { body: concat([uint32Bytes(t.offsets), uint32Bytes(t.indices), leBytes(t.data)]), headers: rawHeaders(t, options) };
}
