/**
 * Ragged and sparse tensors in the JSON embeddings envelope (SPEC.md 20.3): `kind` beside `dtype`,
 * per item the matrix (`embedding` and `shape`) or the sparse vector (`indices`, `values`, `nnz`), as
 * Base64 or as numbers. Decoding places every item by `index` into one buffer of rows (or of indices
 * and values), so the result's matrices and vectors are views of one array.
 */
import { base64DecodedLength, decodeBase64Into, bytesToBase64 } from "./base64.js";
import { type ByteOrder, type DType, type TensorData, type Usage, DTYPES, LITTLE_ENDIAN_HOST, allocData, bytesOf, checkLength, describe, parseByteOrder, parseDType, parseUsage, rowBytes, swapBytes } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { fillRow, numberRow } from "./json.js";
import { type KindEncodeOptions, type RaggedTensor, type SparseDType, type SparseTensor, checkIndices, checkVocabulary, parseSparseDType, raggedWidth } from "./ragged.js";

const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true });

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const invalid = (field: string, why: string, offset?: number) => new DensewireError("invalid_field", why, { field, offset });
const mismatch = (field: string, why: string) => new DensewireError("shape_mismatch", why, { field });

interface Envelope {
  doc: Record<string, unknown>;
  data: unknown[];
  dtype: DType;
  byteorder: ByteOrder;
  dims: number;
  model: string | undefined;
  usage: Usage | undefined;
}

/**
 * Parses the envelope and checks its keys in SPEC.md 20.3's order: `kind`, `data`, `dtype`, `byteorder`,
 * `dimensions`, `model`, `usage` (the items' indexes and contents come after).
 */
function envelope(input: string | Uint8Array | ArrayBuffer | object, kind: "ragged" | "sparse"): Envelope {
  let doc: unknown = input;
  if (input instanceof ArrayBuffer || ArrayBuffer.isView(input)) {
    const bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    try {
      doc = utf8.decode(bytes);
    } catch (e) {
      throw new DensewireError("malformed", "JSON body is not valid UTF-8", {}, { cause: e });
    }
  }
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch (e) {
      throw new DensewireError("malformed", `not valid JSON: ${(e as Error).message}`, {}, { cause: e });
    }
  }
  if (!isObject(doc)) throw new DensewireError("malformed", `the envelope must be a JSON object, got ${describe(doc)}`);
  if (doc["kind"] !== kind) throw invalid("kind", doc["kind"] === undefined ? `missing (a ${kind} response says "kind": "${kind}")` : `must be "${kind}", got ${describe(doc["kind"])}`);
  const data = doc["data"];
  if (!Array.isArray(data)) throw invalid("data", data === undefined ? "missing" : `must be an array, got ${describe(data)}`);
  const dtype = doc["dtype"] == null ? "float32" : kind === "ragged" ? parseDType(doc["dtype"]) : parseSparseDType(doc["dtype"]);
  const byteorder = doc["byteorder"] == null ? "little" : parseByteOrder(doc["byteorder"]);
  const dims = doc["dimensions"];
  if (!Number.isSafeInteger(dims) || (dims as number) < 0) throw invalid("dimensions", dims === undefined ? `missing (required for ${kind} tensors)` : `must be a non-negative integer, got ${describe(dims)}`);
  if (kind === "sparse") checkVocabulary(dims as number, "dimensions");
  const model = doc["model"];
  if (model != null && typeof model !== "string") throw invalid("model", `must be a string, got ${describe(model)}`);
  const usage = parseUsage(doc["usage"]);
  return { doc, data, dtype, byteorder, dims: dims as number, model: model ?? undefined, usage };
}

/** Each item's object and its `index` (SPEC.md 6.2's rules), in the order of `data`. */
function placed(data: unknown[]): [Record<string, unknown>, number][] {
  const n = data.length;
  const seen = new Uint8Array(n);
  return data.map((item, i) => {
    if (!isObject(item)) throw invalid(`data[${i}]`, `must be an object, got ${describe(item)}`);
    const index = item["index"];
    if (typeof index !== "number" || !Number.isInteger(index)) throw invalid(`data[${i}].index`, index === undefined ? "missing" : `must be an integer, got ${describe(index)}`);
    if (index < 0 || index >= n) throw mismatch(`data[${i}].index`, `index ${index} is outside [0, ${n})`);
    if (seen[index] === 1) throw mismatch(`data[${i}].index`, `index ${index} occurs twice`);
    seen[index] = 1;
    return [item, index];
  });
}

function offsetsOf(counts: number[]): Uint32Array {
  const offsets = new Uint32Array(counts.length + 1);
  counts.forEach((m, i) => (offsets[i + 1] = offsets[i]! + m));
  return offsets;
}

function meta<T extends RaggedTensor | SparseTensor>(t: T, env: Envelope): T {
  if (env.model !== undefined) t.model = env.model;
  if (env.usage !== undefined) t.usage = env.usage;
  return t;
}

/**
 * SPEC.md 20.3 checks one item in full before the next. The decoders check every item's structure in a
 * first pass (to size the one buffer) and its contents in a second: when the first pass fails at item `k`,
 * the contents of the items before it are checked first (into scratch buffers: the error path only).
 */
function contentsBefore(k: number, check: (i: number) => void, structural: unknown): never {
  for (let i = 0; i < k; i++) check(i);
  throw structural;
}

/**
 * Throws the error of a Base64 part that does not decode to `count * width` bytes (`invalid_base64`
 * first, then `length_mismatch`), found without a buffer: a count the text cannot back never sizes one.
 * A string of about the right length is checked when it is decoded.
 */
function base64Sized(s: string, count: number, width: number, field: string): void {
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  if (s.length % 4 !== 1 && Math.floor((s.length * 3) / 4) - pad === count * width) return;
  checkLength(base64DecodedLength(s, field), count * width, field);
}

/** Decodes a Base64 part into `target`, swapping big-endian items. */
function base64Part(s: string, target: Uint8Array, itemBytes: number, byteorder: ByteOrder, field: string): void {
  decodeBase64Into(s, target, field);
  if (itemBytes > 1 && (byteorder === "little") !== LITTLE_ENDIAN_HOST) swapBytes(target, itemBytes);
}

/**
 * Decodes a ragged JSON envelope (SPEC.md 20.3). Errors: `invalid_field` on `kind`, `dimensions`,
 * `data[i].shape`, `data[i].embedding` and its items; `shape_mismatch` on `data[i].shape`,
 * `data[i].index` and a row of another length (`data[i].embedding[r]`); `invalid_base64` and
 * `length_mismatch` on `data[i].embedding`.
 */
export function decodeRaggedJSON(input: string | Uint8Array | ArrayBuffer | object): RaggedTensor {
  const env = envelope(input, "ragged");
  const { data, dtype, byteorder, dims: d } = env;
  const items = placed(data);
  const counts = new Array<number>(data.length).fill(0);
  const w = raggedWidth(dtype, d);
  const rb = rowBytes(dtype, d);
  const contents = (i: number, out: ReturnType<typeof allocData>, at: number): void => {
    const emb = items[i]![0]["embedding"] as string | unknown[];
    const field = `data[${i}].embedding`;
    if (typeof emb === "string") {
      const m = (items[i]![0]["shape"] as number[])[0]!;
      base64Part(emb, new Uint8Array(out.buffer, out.byteOffset + at * rb, m * rb), DTYPES[dtype].itemBytes, byteorder, field);
      return;
    }
    emb.forEach((row, r) => {
      if (!Array.isArray(row) || row.length !== w) throw mismatch(`${field}[${r}]`, `must be an array of ${w} items, got ${describe(row)}`);
      fillRow(dtype, out, (at + r) * w, row, `${field}[${r}]`);
    });
  };
  for (const [i, [item, index]] of items.entries()) {
    try {
      const shape = item["shape"];
      const emb = item["embedding"];
      if (shape === undefined && typeof emb === "string") throw invalid(`data[${i}].shape`, "missing (required for a Base64 item)");
      if (shape !== undefined) {
        if (!Array.isArray(shape) || shape.length !== 2 || !shape.every((x) => Number.isSafeInteger(x) && x >= 0)) {
          throw invalid(`data[${i}].shape`, `must be two non-negative integers [m, d], got ${describe(shape)}`);
        }
        if (shape[1] !== d) throw mismatch(`data[${i}].shape`, `shape [${shape.join(", ")}] disagrees with dimensions ${d}`);
      }
      if (typeof emb !== "string" && !Array.isArray(emb)) throw invalid(`data[${i}].embedding`, `must be a Base64 string or an array of rows, got ${describe(emb)}`);
      if (Array.isArray(emb) && shape !== undefined && emb.length !== shape[0]) throw mismatch(`data[${i}].shape`, `shape [${shape.join(", ")}] but ${emb.length} rows`);
      // the Base64 length before any buffer is sized by shape[0] (which the text may not back)
      if (typeof emb === "string") base64Sized(emb, (shape as number[])[0]!, rb, `data[${i}].embedding`);
      counts[index] = typeof emb === "string" ? (shape as number[])[0]! : emb.length;
    } catch (e) {
      contentsBefore(i, (j) => contents(j, allocData(dtype, counts[items[j]![1]]! * w), 0), e);
    }
  }
  const offsets = offsetsOf(counts);
  const out = allocData(dtype, offsets[data.length]! * w);
  for (const [i, [, index]] of items.entries()) contents(i, out, offsets[index]!);
  return meta({ kind: "ragged", dtype, shape: [data.length, d], offsets, data: out }, env);
}

/**
 * Decodes a sparse JSON envelope (SPEC.md 20.3). Errors: `invalid_field` on `kind`, `dimensions` (the
 * vocabulary size, 1 to 2^32), `dtype` (a float dtype), `data[i].nnz`, `data[i].indices` or
 * `.values` and their items (an index not below `V` or not above the one before it included);
 * `shape_mismatch` on `data[i].values` (lengths) and `data[i].index`; `invalid_base64` and
 * `length_mismatch` on `data[i].indices` / `data[i].values`.
 */
export function decodeSparseJSON(input: string | Uint8Array | ArrayBuffer | object): SparseTensor {
  const env = envelope(input, "sparse");
  const { data, byteorder, dims: v } = env;
  const dtype = env.dtype as SparseDType;
  const items = placed(data);
  const counts = new Array<number>(data.length).fill(0);
  const itemBytes = DTYPES[dtype].itemBytes;
  const contents = (i: number, indices: Uint32Array, values: ReturnType<typeof allocData>, at: number, end: number): void => {
    const item = items[i]![0];
    const ind = item["indices"] as string | unknown[];
    const val = item["values"] as string | unknown[];
    const f = `data[${i}]`;
    if (typeof ind === "string") {
      base64Part(ind, new Uint8Array(indices.buffer, indices.byteOffset + 4 * at, 4 * (end - at)), 4, byteorder, `${f}.indices`);
      base64Part(val as string, new Uint8Array(values.buffer, values.byteOffset + itemBytes * at, itemBytes * (end - at)), itemBytes, byteorder, `${f}.values`);
    } else {
      ind.forEach((x, j) => {
        if (!Number.isSafeInteger(x) || (x as number) < 0 || (x as number) > 0xffffffff) throw invalid(`${f}.indices[${j}]`, `must be an integer from 0 to 2^32 - 1, got ${describe(x)}`);
        indices[at + j] = x as number;
      });
      const vals = val as unknown[];
      const nnz = item["nnz"];
      if (vals.length !== ind.length || (nnz !== undefined && nnz !== ind.length)) {
        throw mismatch(`${f}.values`, `${ind.length} indices, ${vals.length} values${nnz === undefined ? "" : `, nnz ${String(nnz)}`}`);
      }
      fillRow(dtype, values, at, vals, `${f}.values`);
    }
    checkIndices(indices.subarray(at, end), Uint32Array.of(0, end - at), v, 0, "", (j) => `${f}.indices[${j}]`);
  };
  for (const [i, [item, index]] of items.entries()) {
    try {
      const nnz = item["nnz"];
      const ind = item["indices"];
      const val = item["values"];
      if (nnz === undefined && typeof ind === "string") throw invalid(`data[${i}].nnz`, "missing (required for a Base64 item)");
      if (nnz !== undefined && !(Number.isSafeInteger(nnz) && (nnz as number) >= 0)) throw invalid(`data[${i}].nnz`, `must be a non-negative integer, got ${describe(nnz)}`);
      if (typeof ind !== "string" && !Array.isArray(ind)) throw invalid(`data[${i}].indices`, `must be a Base64 string or an array, got ${describe(ind)}`);
      if (typeof val !== typeof ind || Array.isArray(val) !== Array.isArray(ind)) throw invalid(`data[${i}].values`, `must be ${typeof ind === "string" ? "a Base64 string" : "an array"} like indices, got ${describe(val)}`);
      if (typeof ind === "string") {
        // the Base64 lengths before any buffer is sized by nnz (which the text may not back)
        base64Sized(ind, nnz as number, 4, `data[${i}].indices`);
        try {
          base64Sized(val as string, nnz as number, itemBytes, `data[${i}].values`);
        } catch (e) {
          base64DecodedLength(ind, `data[${i}].indices`); // the indices' characters come before the values' length
          throw e;
        }
      }
      counts[index] = typeof ind === "string" ? (nnz as number) : ind.length;
    } catch (e) {
      contentsBefore(i, (j) => {
        const m = counts[items[j]![1]]!;
        contents(j, new Uint32Array(m), allocData(dtype, m), 0, m);
      }, e);
    }
  }
  const offsets = offsetsOf(counts);
  const k = offsets[data.length]!;
  const indices = new Uint32Array(k);
  const values = allocData(dtype, k);
  for (const [i, [, index]] of items.entries()) contents(i, indices, values, offsets[index]!, offsets[index + 1]!);
  return meta({ kind: "sparse", dtype, shape: [data.length, v], offsets, indices, data: values }, env);
}

/** Options of the JSON encoders: `encodingFormat` (default `base64`), Base64's `byteorder`, model and usage. */
export interface KindJSONOptions extends KindEncodeOptions {
  encodingFormat?: "float" | "base64";
  byteorder?: ByteOrder;
}

function tail(t: RaggedTensor | SparseTensor, options: KindJSONOptions, byteorder: ByteOrder): string {
  const model = options.model ?? t.model ?? "";
  const usage = options.usage ?? t.usage ?? { prompt_tokens: 0, total_tokens: 0 };
  return (
    `"model":${JSON.stringify(model)},"usage":{"prompt_tokens":${usage.prompt_tokens},"total_tokens":${usage.total_tokens}},` +
    `"kind":"${t.kind}","dtype":"${t.dtype}","byteorder":"${byteorder}","dimensions":${t.shape[1]}}`
  );
}

function formatOf(options: KindJSONOptions): ["float" | "base64", ByteOrder] {
  const format = options.encodingFormat ?? "base64";
  if (format !== "float" && format !== "base64") throw invalid("encoding_format", `must be "float" or "base64", got ${describe(format)}`);
  return [format, format === "base64" ? parseByteOrder(options.byteorder ?? "little") : "little"];
}

/** Encodes a ragged tensor as a JSON envelope (SPEC.md 20.3); `float` rows fail with `non_finite` on NaN and infinities. */
export function encodeRaggedJSON(t: RaggedTensor, options: KindJSONOptions = {}): string {
  const [format, byteorder] = formatOf(options);
  const [n, d] = t.shape;
  const w = raggedWidth(t.dtype, d);
  const rb = rowBytes(t.dtype, d);
  const bytes = format === "base64" ? bytesOf(t.data, DTYPES[t.dtype].itemBytes, byteorder) : undefined;
  const items = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const start = t.offsets[i]!;
    const m = t.offsets[i + 1]! - start;
    let emb: string;
    if (bytes !== undefined) emb = '"' + bytesToBase64(bytes.subarray(start * rb, (start + m) * rb)) + '"';
    else emb = "[" + Array.from({ length: m }, (_, r) => numberRow(t.dtype, t.data, (start + r) * w, w, i)).join(",") + "]";
    items[i] = `{"object":"embedding","index":${i},"embedding":${emb},"shape":[${m},${d}]}`;
  }
  return `{"object":"list","data":[${items.join(",")}],` + tail(t, options, byteorder);
}

/** Encodes a sparse tensor as a JSON envelope (SPEC.md 20.3). */
export function encodeSparseJSON(t: SparseTensor, options: KindJSONOptions = {}): string {
  const [format, byteorder] = formatOf(options);
  const itemBytes = DTYPES[t.dtype].itemBytes;
  const indexBytes = format === "base64" ? bytesOf(t.indices as unknown as TensorData, 4, byteorder) : undefined;
  const valueBytes = format === "base64" ? bytesOf(t.data, itemBytes, byteorder) : undefined;
  const items = new Array<string>(t.shape[0]);
  for (let i = 0; i < t.shape[0]; i++) {
    const a = t.offsets[i]!;
    const b = t.offsets[i + 1]!;
    const parts =
      indexBytes !== undefined
        ? `"indices":"${bytesToBase64(indexBytes.subarray(4 * a, 4 * b))}","values":"${bytesToBase64(valueBytes!.subarray(itemBytes * a, itemBytes * b))}"`
        : `"indices":[${Array.from(t.indices.subarray(a, b)).join(",")}],"values":${numberRow(t.dtype, t.data as TensorData, a, b - a, i)}`;
    items[i] = `{"object":"sparse_embedding","index":${i},${parts},"nnz":${b - a}}`;
  }
  return `{"object":"list","data":[${items.join(",")}],` + tail(t, options, byteorder);
}

