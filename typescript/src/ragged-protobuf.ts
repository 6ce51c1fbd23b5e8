/**
 * Ragged and sparse tensors in Protobuf (SPEC.md 20.6): the messages `RaggedTensor`, `SparseTensor`,
 * `RaggedEmbeddingsResponse` and `SparseEmbeddingsResponse` of proto/densewire/v1/tensor.proto, read
 * with the wire reader of the plain tensor (section 9's errors) and written by hand in the official
 * serializers' order (fields by number, proto3 defaults omitted, `shape` packed), so byte-exact.
 * `offsets`, `indices` and `data` are views of the body when aligned.
 */
import { type DType, type Usage, DTYPES, DTYPE_NAMES, rowBytes, viewAs } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { Reader, readShapeEntries } from "./pbwire.js";
import {
  type KindEncodeOptions,
  type RaggedTensor,
  type SparseDType,
  type SparseTensor,
  checkIndices,
  checkOffsets,
  checkVocabulary,
  parseSparseDType,
  uint32Bytes,
  uint32s,
} from "./ragged.js";

/** The messages of SPEC.md 20.6. */
export type RaggedProtobufMessage = "RaggedTensor" | "RaggedEmbeddingsResponse";
export type SparseProtobufMessage = "SparseTensor" | "SparseEmbeddingsResponse";

const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const utf8Encoder = /*@__PURE__*/ new TextEncoder();

interface Fields {
  dtype: number;
  shape: number[];
  parts: Map<number, [number, number]>; // field number -> [start, end) of a bytes field
}

/** Reads a RaggedTensor / SparseTensor between r.pos and end; `names` are its bytes fields by number. */
function readKind(r: Reader, end: number, names: Record<number, string>, prefix: string): Fields {
  const t: Fields = { dtype: 0, shape: [], parts: new Map() };
  while (r.pos < end) {
    const tagPos = r.pos;
    const [field, wt] = r.tag(end);
    if (field === 1) {
      if (wt !== 0) throw r.malformed(tagPos, `wire type ${wt} for the varint field`, prefix + "dtype");
      t.dtype = r.varint(end);
    } else if (field === 2) {
      readShapeEntries(r, end, tagPos, wt, t.shape, prefix);
    } else if (names[field] !== undefined) {
      if (wt !== 2) throw r.malformed(tagPos, `wire type ${wt} for the bytes field`, prefix + names[field]);
      t.parts.set(field, r.delimited(end, tagPos));
    } else {
      r.skip(wt, field, end, tagPos);
    }
  }
  return t;
}

function head(r: Reader, t: Fields, sparse: boolean, prefix: string): { dtype: DType; n: number; d: number; offsets: Uint32Array } {
  if (t.dtype === 0) throw new DensewireError("invalid_field", "absent or 0 (DTYPE_UNSPECIFIED)", { field: prefix + "dtype" });
  const name = DTYPE_NAMES[t.dtype - 1];
  if (name === undefined) throw new DensewireError("unknown_dtype", `unknown DType enum value ${t.dtype}`, { field: prefix + "dtype" });
  const dtype = sparse ? parseSparseDType(name, prefix + "dtype") : name;
  if (t.shape.length !== 2 || !t.shape.every((x) => Number.isSafeInteger(x))) {
    throw new DensewireError("invalid_field", `must have two entries [n, ${sparse ? "V" : "d"}]`, { field: prefix + "shape" });
  }
  const [n, d] = t.shape as [number, number];
  if (sparse) checkVocabulary(d, prefix + "shape");
  return { dtype, n, d, offsets: checkOffsets(bytesOf(r, t, 3), n, 0, prefix + "offsets") };
}

function bytesOf(r: Reader, t: Fields, field: number): Uint8Array {
  const span = t.parts.get(field);
  return span === undefined ? r.b.subarray(0, 0) : r.b.subarray(span[0], span[1]);
}

function part(r: Reader, t: Fields, field: number, expected: number, name: string): Uint8Array {
  const b = bytesOf(r, t, field);
  if (b.length !== expected) throw new DensewireError("length_mismatch", `${b.length} bytes of ${name} where the offsets need ${expected}`, { offset: Math.min(b.length, expected), field: name });
  return b;
}

/** A response's top level: model (1), the tensor (2) and usage (3); returns the tensor's fields. */
function readResponse(r: Reader, names: Record<number, string>): { fields: Fields | undefined; model: string; usage: Usage } {
  const end = r.b.length;
  let fields: Fields | undefined;
  let model = "";
  const usage = { prompt_tokens: 0, total_tokens: 0 };
  while (r.pos < end) {
    const tagPos = r.pos;
    const [field, wt] = r.tag(end);
    if (field >= 1 && field <= 3 && wt !== 2) throw r.malformed(tagPos, `wire type ${wt} for a length-delimited field`, ["model", "embeddings", "usage"][field - 1]);
    if (field === 1) {
      const [s, e] = r.delimited(end, tagPos);
      try {
        model = utf8.decode(r.b.subarray(s, e));
      } catch {
        throw r.malformed(tagPos, "model is not valid UTF-8", "model");
      }
    } else if (field === 2) {
      const [s, e] = r.delimited(end, tagPos);
      r.pos = s;
      fields = readKind(r, e, names, "embeddings.");
    } else if (field === 3) {
      const [s, e] = r.delimited(end, tagPos);
      r.pos = s;
      while (r.pos < e) {
        const innerPos = r.pos;
        const [f, w] = r.tag(e);
        if ((f === 1 || f === 2) && w !== 0) throw r.malformed(innerPos, `wire type ${w} for a varint field`, "usage");
        if (f === 1) usage.prompt_tokens = r.varint(e);
        else if (f === 2) usage.total_tokens = r.varint(e);
        else r.skip(w, f, e, innerPos);
      }
    } else {
      r.skip(wt, field, end, tagPos);
    }
  }
  return { fields, model, usage };
}

function read(bytes: Uint8Array, response: boolean, names: Record<number, string>): { r: Reader; t: Fields; prefix: string; model?: string; usage?: Usage } {
  const r = new Reader(bytes);
  if (!response) return { r, t: readKind(r, bytes.length, names, ""), prefix: "" };
  const { fields, model, usage } = readResponse(r, names);
  if (fields === undefined) throw new DensewireError("invalid_field", "missing (the response has no tensor)", { field: "embeddings" });
  return { r, t: fields, prefix: "embeddings.", model, usage };
}

function messageOf<M extends string>(given: M | undefined, tensor: M, response: M): boolean {
  const m = given ?? tensor;
  if (m !== tensor && m !== response) throw new TypeError(`unknown message ${String(m)}`);
  return m === response;
}

/** Decodes a `RaggedTensor` (default) or `RaggedEmbeddingsResponse` (SPEC.md 20.6). */
export function decodeRaggedProtobuf(body: Uint8Array | ArrayBuffer, options: { message?: RaggedProtobufMessage } = {}): RaggedTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const response = messageOf(options.message, "RaggedTensor", "RaggedEmbeddingsResponse");
  const { r, t, prefix, model, usage } = read(bytes, response, { 3: "offsets", 4: "data" });
  const { dtype, n, d, offsets } = head(r, t, false, prefix);
  const data = part(r, t, 4, offsets[n]! * rowBytes(dtype, d), prefix + "data");
  const out: RaggedTensor = { kind: "ragged", dtype, shape: [n, d], offsets, data: viewAs(data, dtype) };
  if (response) Object.assign(out, { model, usage });
  return out;
}

/** Decodes a `SparseTensor` (default) or `SparseEmbeddingsResponse` (SPEC.md 20.6). */
export function decodeSparseProtobuf(body: Uint8Array | ArrayBuffer, options: { message?: SparseProtobufMessage } = {}): SparseTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const response = messageOf(options.message, "SparseTensor", "SparseEmbeddingsResponse");
  const { r, t, prefix, model, usage } = read(bytes, response, { 3: "offsets", 4: "indices", 5: "data" });
  const { dtype, n, d: v, offsets } = head(r, t, true, prefix);
  const k = offsets[n]!;
  const indices = uint32s(part(r, t, 4, 4 * k, prefix + "indices"));
  const data = part(r, t, 5, k * DTYPES[dtype].itemBytes, prefix + "data");
  checkIndices(indices, offsets, v, 0, prefix + "indices");
  const out: SparseTensor = { kind: "sparse", dtype: dtype as SparseDType, shape: [n, v], offsets, indices, data: viewAs(data, dtype) };
  if (response) Object.assign(out, { model, usage });
  return out;
}

// ---------------------------------------------------------------------------------------- encoding

class Writer {
  private chunks: Uint8Array[] = [];
  private head: number[] = [];
  size = 0;
  varint(v: number): this {
    while (v >= 0x80) {
      this.head.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.head.push(v);
    return this;
  }
  bytes(b: Uint8Array): this {
    this.flush();
    this.chunks.push(b);
    return this;
  }
  private flush(): void {
    if (this.head.length > 0) this.chunks.push(Uint8Array.from(this.head));
    this.head = [];
  }
  /** A length-delimited field `field` holding `w`'s bytes, or `b`. */
  field(field: number, b: Uint8Array | Writer): this {
    const inner = b instanceof Writer ? b.finish() : b;
    return this.varint(field * 8 + 2).varint(inner.length).bytes(inner);
  }
  finish(): Uint8Array {
    this.flush();
    const out = new Uint8Array(this.chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
}

function tensorMessage(t: RaggedTensor | SparseTensor): Writer {
  const w = new Writer().varint(8).varint(DTYPES[t.dtype].protobuf);
  const shape = new Writer().varint(t.shape[0]).varint(t.shape[1]);
  w.field(2, shape).field(3, uint32Bytes(t.offsets));
  const data = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  if (t.kind === "sparse" && t.indices.length > 0) w.field(4, uint32Bytes(t.indices));
  if (data.length > 0) w.field(t.kind === "sparse" ? 5 : 4, data);
  return w;
}

function responseMessage(t: RaggedTensor | SparseTensor, options: KindEncodeOptions): Uint8Array {
  const w = new Writer();
  const model = options.model ?? t.model ?? "";
  const usage = options.usage ?? t.usage ?? { prompt_tokens: 0, total_tokens: 0 };
  if (model !== "") w.field(1, utf8Encoder.encode(model));
  w.field(2, tensorMessage(t));
  const u = new Writer();
  if (usage.prompt_tokens !== 0) u.varint(8).varint(usage.prompt_tokens);
  if (usage.total_tokens !== 0) u.varint(16).varint(usage.total_tokens);
  return w.field(3, u).finish();
}

/** Encodes a ragged tensor as a `RaggedEmbeddingsResponse` (the default when a model or usage is given) or a `RaggedTensor`. */
export function encodeRaggedProtobuf(t: RaggedTensor, options: KindEncodeOptions & { message?: RaggedProtobufMessage } = {}): Uint8Array {
  const response = options.message === undefined ? options.model !== undefined || options.usage !== undefined || t.model !== undefined || t.usage !== undefined : messageOf(options.message, "RaggedTensor", "RaggedEmbeddingsResponse");
  return response ? responseMessage(t, options) : tensorMessage(t).finish();
}

/** Encodes a sparse tensor as a `SparseEmbeddingsResponse` (the default when a model or usage is given) or a `SparseTensor`. */
export function encodeSparseProtobuf(t: SparseTensor, options: KindEncodeOptions & { message?: SparseProtobufMessage } = {}): Uint8Array {
  const response = options.message === undefined ? options.model !== undefined || options.usage !== undefined || t.model !== undefined || t.usage !== undefined : messageOf(options.message, "SparseTensor", "SparseEmbeddingsResponse");
  return response ? responseMessage(t, options) : tensorMessage(t).finish();
}
