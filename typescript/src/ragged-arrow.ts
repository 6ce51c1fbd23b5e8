/**
 * Ragged and sparse tensors as Arrow IPC streams (SPEC.md 20.7), through the optional apache-arrow
 * (as arrow.ts): one non-nullable column `embedding`, `List<FixedSizeList<T, d>>` (or
 * `List<FixedSizeBinary>` for binary) for a ragged tensor, `Struct<indices: List<UInt32>, values:
 * List<T>>` with `densewire.vocabulary_size` for a sparse one; `densewire.kind` in the schema metadata.
 * The list offsets are the tensor's offsets (rebased to 0 for a slice); rows, indices and values are
 * apache-arrow's buffers, views of the body when it is aligned (one batch).
 */
import { checkArrowStream } from "./arrowcheck.js";
import { dtypeOfItem, innerType, loadArrow, ownBuffer } from "./arrow.js";
import { type DType, type TensorData, type Usage, DTYPES, allocData, parseDType, rowBytes } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { type KindEncodeOptions, type RaggedTensor, type SparseDType, type SparseTensor, checkIndices, checkVocabulary, parseSparseDType } from "./ragged.js";

type ArrowModule = Awaited<ReturnType<typeof loadArrow>>;
type ArrowData = { offset: number; length: number; nullCount: number; valueOffsets: Int32Array; values: TensorData; children: ArrowData[] };

const invalid = (field: string, why: string) => new DensewireError("invalid_field", why, { field });

async function readTable(body: Uint8Array | ArrayBuffer, kind: "ragged" | "sparse") {
  const A = await loadArrow();
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  checkArrowStream(bytes);
  let table: InstanceType<ArrowModule["Table"]>;
  try {
    table = A.tableFromIPC(bytes);
  } catch (e) {
    throw new DensewireError("malformed", `not a readable Arrow IPC stream: ${(e as Error).message}`, {}, { cause: e });
  }
  const meta = table.schema.metadata;
  const k = meta.get("densewire.kind");
  if (k !== kind) throw invalid("densewire.kind", k === undefined ? `missing (a ${kind} stream says densewire.kind ${kind})` : `must be ${kind}, got ${JSON.stringify(k)}`);
  const col = table.schema.fields.findIndex((f) => f.name === "embedding");
  if (col < 0) throw invalid("embedding", "the stream has no column named embedding");
  const field = table.schema.fields[col]!;
  const named = meta.get("densewire.dtype") ?? field.metadata.get("densewire.dtype");
  const columns: ArrowData[] = table.batches.map((b) => b.data.children[col] as unknown as ArrowData);
  for (const c of columns) if (c.nullCount > 0) throw invalid("embedding", "the column holds nulls");
  return { A, meta, field, named, columns, n: table.numRows };
}

/** One List column's rows: offsets rebased to 0 (n + 1 uint32) and the child's [start, end) items. */
function listRows(columns: ArrowData[], n: number): { offsets: Uint32Array; spans: [ArrowData, number, number][] } {
  // a batch may announce more rows than its offsets buffer holds (apache-arrow does not check): the
  // buffer, a view of the body, bounds every loop and allocation below
  let rows = 0;
  for (const c of columns) {
    if (!(c.valueOffsets instanceof Int32Array) || c.valueOffsets.length < c.offset + c.length + 1) {
      throw new DensewireError("malformed", `a list of ${c.length} rows has ${c.valueOffsets?.length ?? 0} offsets`);
    }
    rows += c.length;
  }
  if (rows !== n) throw new DensewireError("malformed", `the batches hold ${rows} rows, the table ${n}`);
  const offsets = new Uint32Array(n + 1);
  const spans: [ArrowData, number, number][] = [];
  let row = 0;
  for (const c of columns) {
    const vo = c.valueOffsets;
    const first = vo[c.offset]!;
    for (let i = 0; i < c.length; i++) {
      const o = vo[c.offset + i + 1]!;
      if (o < vo[c.offset + i]! || o < first) throw new DensewireError("malformed", `list offsets decrease at row ${row + i}`);
      offsets[row + i + 1] = offsets[row]! + (o - first);
    }
    spans.push([c.children[0]!, first, vo[c.offset + c.length]!]);
    row += c.length;
  }
  return { offsets, spans };
}

/** The items [start, end) of the spans' children, `width` values per item: a view for one span, else one copy. */
function gather(dtype: DType, spans: [ArrowData, number, number][], width: number, inner: (d: ArrowData) => [TensorData, number]): TensorData {
  const views = spans.map(([child, a, b]) => {
    const [values, base] = inner(child);
    let v = values;
    if ((dtype === "float16" || dtype === "bfloat16") && !(v instanceof Uint16Array)) v = new Uint16Array(v.buffer, v.byteOffset, v.length);
    return v.subarray((base + a) * width, (base + b) * width);
  });
  if (views.length === 1) return views[0]!;
  const out = allocData(dtype, views.reduce((s, v) => s + v.length, 0));
  let at = 0;
  for (const v of views) {
    (out as Uint8Array).set(v as Uint8Array, at);
    at += v.length;
  }
  return out;
}

function usageOf(meta: Map<string, string>): { model?: string; usage?: Usage } {
  const out: { model?: string; usage?: Usage } = {};
  const model = meta.get("densewire.model");
  if (model !== undefined) out.model = model;
  const pt = meta.get("densewire.prompt_tokens");
  const tt = meta.get("densewire.total_tokens");
  for (const [key, v] of [["densewire.prompt_tokens", pt], ["densewire.total_tokens", tt]] as const) {
    if (v !== undefined && !/^[0-9]+$/.test(v)) throw invalid(key, `must be a decimal count, got ${JSON.stringify(v)}`);
  }
  if (pt !== undefined && tt !== undefined) out.usage = { prompt_tokens: Number(pt), total_tokens: Number(tt) };
  return out;
}

function decimal(meta: Map<string, string>, key: string): number | undefined {
  const v = meta.get(key);
  if (v === undefined) return undefined;
  const x = /^(0|[1-9][0-9]*)$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(x)) throw invalid(key, `must be a decimal integer, got ${JSON.stringify(v)}`);
  return x;
}

/** Decodes a ragged Arrow stream (SPEC.md 20.7); errors in the order of section 10. */
export async function decodeRaggedArrow(body: Uint8Array | ArrayBuffer): Promise<RaggedTensor> {
  return structural(() => raggedArrow(body));
}

/**
 * apache-arrow follows a record batch's structure as the schema says: a batch whose nodes or
 * buffers do not match it (found by fuzzing) fails with a TypeError or RangeError, which is malformed.
 */
async function structural<T>(decode: () => Promise<T>): Promise<T> {
  try {
    return await decode();
  } catch (e) {
    if (e instanceof DensewireError) throw e;
    throw new DensewireError("malformed", `the record batch does not match its schema: ${(e as Error).message}`, {}, { cause: e });
  }
}

async function raggedArrow(body: Uint8Array | ArrayBuffer): Promise<RaggedTensor> {
  const { A, meta, field, named, columns, n } = await readTable(body, "ragged");
  const type = field.type;
  const item = A.DataType.isList(type) ? type.children[0]!.type : undefined;
  let dtype: DType;
  let width: number;
  if (item !== undefined && A.DataType.isFixedSizeList(item)) {
    const it = dtypeOfItem(A, item.children[0]!.type);
    dtype = named !== undefined ? parseDType(named, "densewire.dtype") : (it ?? "float32");
    if (it === undefined || it !== dtype) throw invalid("embedding", `column type ${String(type)} does not carry dtype ${dtype}`);
    width = item.listSize;
  } else if (item !== undefined && A.DataType.isFixedSizeBinary(item)) {
    dtype = named !== undefined ? parseDType(named, "densewire.dtype") : "binary";
    if (dtype !== "binary") throw invalid("embedding", `column type ${String(type)} does not carry dtype ${dtype}`);
    width = item.byteWidth;
  } else {
    throw invalid("embedding", `column type ${String(type)} is not a List of FixedSizeList or FixedSizeBinary`);
  }
  let d = dtype === "binary" ? width * 8 : width;
  const dims = decimal(meta, "densewire.dimensions");
  if (dims !== undefined) {
    if (rowBytes(dtype, dims) !== rowBytes(dtype, d)) throw invalid("densewire.dimensions", `${dims} disagrees with the column type ${String(type)}`);
    d = dims;
  }
  const { offsets, spans } = listRows(columns, n);
  const data = gather(dtype, spans, width, (child) =>
    dtype === "binary" ? [child.values, child.offset] : [child.children[0]!.values, child.children[0]!.offset / width + child.offset],
  );
  if (data.length !== offsets[n]! * width) throw new DensewireError("malformed", `the embedding buffers hold ${data.length} items, ${offsets[n]} rows need ${offsets[n]! * width}`);
  return { kind: "ragged", dtype, shape: [n, d], offsets, data, ...usageOf(meta) };
}

/** Decodes a sparse Arrow stream (SPEC.md 20.7); errors in the order of section 10. */
export async function decodeSparseArrow(body: Uint8Array | ArrayBuffer): Promise<SparseTensor> {
  return structural(() => sparseArrow(body));
}

async function sparseArrow(body: Uint8Array | ArrayBuffer): Promise<SparseTensor> {
  const { A, meta, field, named, columns, n } = await readTable(body, "sparse");
  const type = field.type;
  const ok = A.DataType.isStruct(type) && type.children.length === 2 && type.children[0]!.name === "indices" && type.children[1]!.name === "values" && type.children.every((c) => A.DataType.isList(c.type));
  const indexType = ok ? type.children[0]!.type.children[0]!.type : undefined;
  const valueType = ok ? type.children[1]!.type.children[0]!.type : undefined;
  if (!ok || !A.DataType.isInt(indexType) || indexType.bitWidth !== 32 || indexType.isSigned) throw invalid("embedding", `column type ${String(type)} is not Struct<indices: List<UInt32>, values: List<T>>`);
  const it = dtypeOfItem(A, valueType);
  const dtype = parseSparseDType(named ?? it ?? "float32", "densewire.dtype");
  if (it !== dtype) throw invalid("embedding", `column type ${String(type)} does not carry dtype ${dtype}`);
  const vs = field.metadata.get("densewire.vocabulary_size");
  const v = checkVocabulary(vs !== undefined && /^[1-9][0-9]*$/.test(vs) ? Number(vs) : NaN, "densewire.vocabulary_size");
  const ind = listRows(columns.map((c) => c.children[0]!), n);
  const val = listRows(columns.map((c) => c.children[1]!), n);
  for (let i = 0; i <= n; i++) {
    if (ind.offsets[i] !== val.offsets[i]) throw new DensewireError("shape_mismatch", `row ${i - 1}: the indices and values lists differ in length`, { field: "embedding" });
  }
  const indices = gather("binary", ind.spans, 4, (child) => [new Uint8Array(child.values.buffer, child.values.byteOffset, child.values.byteLength), child.offset]) as Uint8Array;
  const indexArray = new Uint32Array(indices.byteOffset % 4 === 0 ? indices.buffer : indices.slice().buffer, indices.byteOffset % 4 === 0 ? indices.byteOffset : 0, indices.length / 4);
  const values = gather(dtype, val.spans, 1, (child) => [child.values, child.offset]);
  checkIndices(indexArray, ind.offsets, v);
  return { kind: "sparse", dtype: dtype as SparseDType, shape: [n, v], offsets: ind.offsets, indices: indexArray, data: values, ...usageOf(meta) };
}

function schemaMeta(t: RaggedTensor | SparseTensor, options: KindEncodeOptions): Map<string, string> {
  const meta = new Map([
    ["densewire.version", "1"],
    ["densewire.kind", t.kind],
    ["densewire.dtype", t.dtype],
    ["densewire.dimensions", String(t.shape[1])],
  ]);
  const model = options.model ?? t.model;
  const usage = options.usage ?? t.usage;
  if (model !== undefined) meta.set("densewire.model", model);
  if (usage !== undefined) {
    meta.set("densewire.prompt_tokens", String(usage.prompt_tokens));
    meta.set("densewire.total_tokens", String(usage.total_tokens));
  }
  return meta;
}

async function write(A: ArrowModule, type: never, column: unknown, n: number, fieldMeta: Map<string, string>, meta: Map<string, string>): Promise<Uint8Array> {
  const field = new A.Field("embedding", type, false, fieldMeta);
  const schema = new A.Schema([field], meta);
  const struct = A.makeData({ type: new A.Struct([field]), length: n, nullCount: 0, children: [column as never] });
  return A.RecordBatchStreamWriter.writeAll([new A.RecordBatch(schema, struct as never)]).toUint8Array(true);
}

const int32Offsets = (offsets: Uint32Array) => Int32Array.from(offsets);

/** Encodes a ragged tensor as an Arrow IPC stream (SPEC.md 20.7). */
export async function encodeRaggedArrow(t: RaggedTensor, options: KindEncodeOptions = {}): Promise<Uint8Array> {
  const A = await loadArrow();
  const [n, d] = t.shape;
  const rows = t.offsets[n]!;
  const data = ownBuffer(t.data);
  let itemType;
  let items;
  if (t.dtype === "binary") {
    itemType = new A.FixedSizeBinary(rowBytes("binary", d));
    items = A.makeData({ type: itemType, length: rows, nullCount: 0, data: data as Uint8Array });
  } else {
    const inner = innerType(A, t.dtype);
    itemType = new A.FixedSizeList(d, new A.Field("item", inner, false));
    const values = new (inner.ArrayType as new (b: ArrayBufferLike, o: number, l: number) => TensorData)(data.buffer, data.byteOffset, data.byteLength / DTYPES[t.dtype].itemBytes);
    const child = A.makeData({ type: inner, length: rows * d, nullCount: 0, data: values } as never);
    items = A.makeData({ type: itemType, length: rows, nullCount: 0, child } as never);
  }
  const type = new A.List(new A.Field("item", itemType, false));
  const column = A.makeData({ type, length: n, nullCount: 0, valueOffsets: int32Offsets(t.offsets), child: items } as never);
  return write(A, type as never, column, n, new Map([["densewire.dtype", t.dtype]]), schemaMeta(t, options));
}

/** Encodes a sparse tensor as an Arrow IPC stream (SPEC.md 20.7). */
export async function encodeSparseArrow(t: SparseTensor, options: KindEncodeOptions = {}): Promise<Uint8Array> {
  const A = await loadArrow();
  const [n, v] = t.shape;
  const k = t.offsets[n]!;
  const inner = innerType(A, t.dtype);
  const indexField = new A.Field("indices", new A.List(new A.Field("item", new A.Uint32(), false)), false);
  const valueField = new A.Field("values", new A.List(new A.Field("item", inner, false)), false);
  const offsets = int32Offsets(t.offsets);
  const indexData = A.makeData({ type: new A.Uint32(), length: k, nullCount: 0, data: ownBuffer(t.indices) });
  const values = ownBuffer(t.data);
  const valueData = A.makeData({ type: inner, length: k, nullCount: 0, data: new (inner.ArrayType as new (b: ArrayBufferLike, o: number, l: number) => TensorData)(values.buffer, values.byteOffset, k) } as never);
  const type = new A.Struct([indexField, valueField]);
  const column = A.makeData({
    type,
    length: n,
    nullCount: 0,
    children: [
      A.makeData({ type: indexField.type, length: n, nullCount: 0, valueOffsets: offsets, child: indexData } as never),
      A.makeData({ type: valueField.type, length: n, nullCount: 0, valueOffsets: offsets, child: valueData } as never),
    ],
  });
  return write(A, type as never, column, n, new Map([["densewire.dtype", t.dtype], ["densewire.vocabulary_size", String(v)]]), schemaMeta(t, options));
}
