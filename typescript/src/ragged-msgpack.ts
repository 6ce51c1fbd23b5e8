/**
 * Ragged and sparse tensors in MessagePack (SPEC.md 20.5): one map `{model?, kind, dtype, shape,
 * offsets, indices? (sparse), data, usage?}`, the parts as bin. The rows and values are views of the
 * body when their bin is aligned for the dtype (one copy otherwise, as for the plain tensor), the
 * offsets and indices likewise.
 */
import { Encoder } from "@msgpack/msgpack";
import { type DType, DTYPES, describe, parseDType, parseUsage, rowBytes, viewAs } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { decodeMsgpackMap, floatUsageCount } from "./msgpack.js";
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

const invalid = (field: string, why: string) => new DensewireError("invalid_field", why, { field });

function head(bytes: Uint8Array, kind: "ragged" | "sparse"): { doc: Record<string, unknown>; dtype: DType; n: number; d: number; offsets: Uint32Array } {
  const doc = decodeMsgpackMap(bytes);
  if (doc["kind"] !== kind) throw invalid("kind", doc["kind"] === undefined ? `missing (a ${kind} body has "kind": "${kind}")` : `must be "${kind}", got ${describe(doc["kind"])}`);
  if (typeof doc["dtype"] !== "string") throw invalid("dtype", doc["dtype"] === undefined ? "missing" : `must be a str, got ${describe(doc["dtype"])}`);
  const dtype = kind === "sparse" ? parseSparseDType(doc["dtype"]) : parseDType(doc["dtype"]);
  const shape = doc["shape"];
  const count = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
  if (!Array.isArray(shape) || shape.length !== 2 || !count(shape[0]) || !count(shape[1])) {
    throw invalid("shape", `must be an array of two non-negative integers, got ${describe(shape)}`);
  }
  if (kind === "sparse") checkVocabulary(shape[1], "shape");
  const [n, d] = shape as [number, number];
  const offsets = bin(doc, "offsets");
  return { doc, dtype, n, d, offsets: checkOffsets(offsets, n) };
}

function bin(doc: Record<string, unknown>, key: string): Uint8Array {
  const v = doc[key];
  if (!(v instanceof Uint8Array)) throw invalid(key, v === undefined ? "missing" : `must be a bin, got ${describe(v)}`);
  return v;
}

function part(doc: Record<string, unknown>, key: string, expected: number): Uint8Array {
  const v = bin(doc, key);
  if (v.length !== expected) {
    throw new DensewireError("length_mismatch", `${v.length} bytes of ${key} where the offsets need ${expected}`, { offset: Math.min(v.length, expected), field: key });
  }
  return v;
}

function meta<T extends RaggedTensor | SparseTensor>(t: T, doc: Record<string, unknown>, bytes: Uint8Array): T {
  if ("model" in doc) {
    if (typeof doc["model"] !== "string") throw invalid("model", `must be a str, got ${describe(doc["model"])}`);
    t.model = doc["model"];
  }
  const usage = parseUsage(doc["usage"]);
  if (usage !== undefined) {
    const float = floatUsageCount(bytes);
    if (float !== undefined) throw invalid(`usage.${float}`, "must be a MessagePack integer, got a float");
    t.usage = usage;
  }
  return t;
}

/** Decodes a ragged MessagePack body (SPEC.md 20.5), with section 8's errors and 20.1's checks. */
export function decodeRaggedMsgpack(body: Uint8Array | ArrayBuffer): RaggedTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const { doc, dtype, n, d, offsets } = head(bytes, "ragged");
  const data = part(doc, "data", offsets[n]! * rowBytes(dtype, d));
  return meta({ kind: "ragged", dtype, shape: [n, d], offsets, data: viewAs(data, dtype) }, doc, bytes);
}

/** Decodes a sparse MessagePack body (SPEC.md 20.5), with section 8's errors and 20.2's checks. */
export function decodeSparseMsgpack(body: Uint8Array | ArrayBuffer): SparseTensor {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const { doc, dtype, n, d: v, offsets } = head(bytes, "sparse");
  const k = offsets[n]!;
  const indices = uint32s(part(doc, "indices", 4 * k));
  const data = part(doc, "data", k * DTYPES[dtype].itemBytes);
  checkIndices(indices, offsets, v);
  return meta({ kind: "sparse", dtype: dtype as SparseDType, shape: [n, v], offsets, indices, data: viewAs(data, dtype) }, doc, bytes);
}

function encodeMap(t: RaggedTensor | SparseTensor, options: KindEncodeOptions): Uint8Array {
  const model = options.model ?? t.model;
  const usage = options.usage ?? t.usage;
  const data = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const doc: Record<string, unknown> = {};
  if (model !== undefined) doc["model"] = model;
  doc["kind"] = t.kind;
  doc["dtype"] = t.dtype;
  doc["shape"] = [t.shape[0], t.shape[1]];
  doc["offsets"] = uint32Bytes(t.offsets);
  if (t.kind === "sparse") doc["indices"] = uint32Bytes(t.indices);
  doc["data"] = data;
  if (usage !== undefined) doc["usage"] = { prompt_tokens: usage.prompt_tokens, total_tokens: usage.total_tokens };
  return new Encoder({ initialBufferSize: data.length + 8 * t.offsets.length + 256 }).encodeSharedRef(doc);
}

/** Encodes a ragged tensor as a MessagePack body (SPEC.md 20.5, byte-exact). */
export function encodeRaggedMsgpack(t: RaggedTensor, options: KindEncodeOptions = {}): Uint8Array {
  return encodeMap(t, options);
}

/** Encodes a sparse tensor as a MessagePack body (SPEC.md 20.5, byte-exact). */
export function encodeSparseMsgpack(t: SparseTensor, options: KindEncodeOptions = {}): Uint8Array {
  return encodeMap(t, options);
}

