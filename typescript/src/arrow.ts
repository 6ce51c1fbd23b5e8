/**
 * Arrow IPC stream (SPEC.md section 10), through apache-arrow, an OPTIONAL peer dependency loaded on
 * first use with a dynamic `import()`: install it (`npm install apache-arrow`) to use these functions;
 * without it they reject with an error that names the package. Both functions are async for that reason.
 *
 * One non-nullable column `embedding`: `FixedSizeList<item: Float32 | Float16 | Float64 | Int8 | UInt8 |
 * UInt16 (bfloat16 bits), d>`, or `FixedSizeBinary(ceil(d / 8))` for binary; `densewire.*` metadata.
 *
 * Decoding returns apache-arrow's value buffer, which is a view over the body (Arrow aligns buffers to
 * 8 bytes) whenever the body itself starts aligned; a stream of several record batches is concatenated
 * (one copy).
 */
import { checkArrowStream } from "./arrowcheck.js";
import { type DType, type Embeddings, type Tensor, type Usage, DTYPES, allocData, bytesOf, checkLength, checkNoKind, isDType, parseDType, rowBytes } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { checkQuantization } from "./quantization.js";

type ArrowModule = typeof import("apache-arrow");

let importer: () => Promise<unknown> = () => import("apache-arrow");
let loaded: Promise<ArrowModule> | undefined;

/** Loads apache-arrow (once), or rejects with an error naming the missing optional peer dependency. */
export function loadArrow(): Promise<ArrowModule> {
  loaded ??= (importer() as Promise<ArrowModule>).catch((e: unknown) => {
    loaded = undefined;
    throw new Error(
      "densewire: Arrow IPC support needs the optional peer dependency 'apache-arrow', which could not be loaded; " +
        "install it with `npm install apache-arrow`",
      { cause: e },
    );
  });
  return loaded;
}

/**
 * For tests and unusual setups (a bundled or preloaded apache-arrow): replaces the module loader; pass
 * undefined to restore `import("apache-arrow")`.
 */
export function setArrowImporter(fn: (() => Promise<unknown>) | undefined): void {
  importer = fn ?? (() => import("apache-arrow"));
  loaded = undefined;
}

export function innerType(A: ArrowModule, dtype: Exclude<DType, "binary">) {
  switch (dtype) {
    case "float32":
      return new A.Float32();
    case "float16":
      return new A.Float16();
    case "float64":
      return new A.Float64();
    case "int8":
      return new A.Int8();
    case "uint8":
      return new A.Uint8();
    case "bfloat16":
      return new A.Uint16();
  }
}

/** The dtype an Arrow item type carries (bfloat16 for UInt16), or undefined. */
export function dtypeOfItem(A: ArrowModule, t: unknown): DType | undefined {
  if (A.DataType.isFloat(t)) return ({ [A.Precision.HALF]: "float16", [A.Precision.SINGLE]: "float32", [A.Precision.DOUBLE]: "float64" } as Record<number, DType>)[t.precision];
  if (A.DataType.isInt(t)) {
    if (t.bitWidth === 8) return t.isSigned ? "int8" : "uint8";
    if (t.bitWidth === 16 && !t.isSigned) return "bfloat16";
  }
  return undefined;
}

/**
 * Decodes an Arrow IPC stream (model, usage and quantization id from the schema metadata). Errors:
 * `malformed` when apache-arrow cannot read it; `invalid_field` on `embedding` (missing column, wrong
 * type, nulls) or on `densewire.dimensions`; `unknown_dtype` on `densewire.dtype`.
 */
export async function decodeArrow(body: Uint8Array | ArrayBuffer): Promise<Embeddings> {
  const A = await loadArrow();
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  checkArrowStream(bytes);
  let table: InstanceType<ArrowModule["Table"]>;
  try {
    table = A.tableFromIPC(bytes);
  } catch (e) {
    throw new DensewireError("malformed", `not a readable Arrow IPC stream: ${(e as Error).message}`, {}, { cause: e });
  }
  const schema = table.schema;
  checkNoKind(schema.metadata.has("densewire.kind"), schema.metadata.get("densewire.kind"), "densewire.kind");
  const col = schema.fields.findIndex((f) => f.name === "embedding");
  if (col < 0) throw new DensewireError("invalid_field", "the stream has no column named embedding", { field: "embedding" });
  const field = schema.fields[col]!;
  const meta = schema.metadata;
  const type = field.type;

  let dtype: DType;
  let width: number; // items per row in data
  const named = meta.get("densewire.dtype") ?? field.metadata.get("densewire.dtype");
  if (A.DataType.isFixedSizeList(type)) {
    const item = dtypeOfItem(A, type.children[0]!.type);
    dtype = named !== undefined ? parseDType(named, "densewire.dtype") : (item ?? "float32");
    if (item === undefined || item !== dtype || dtype === "binary") {
      throw new DensewireError("invalid_field", `column type ${String(type)} does not carry dtype ${dtype}`, { field: "embedding" });
    }
    width = type.listSize;
  } else if (A.DataType.isFixedSizeBinary(type)) {
    dtype = named !== undefined ? parseDType(named, "densewire.dtype") : "binary";
    if (dtype !== "binary") throw new DensewireError("invalid_field", `column type ${String(type)} does not carry dtype ${dtype}`, { field: "embedding" });
    width = type.byteWidth;
  } else {
    throw new DensewireError("invalid_field", `column type ${String(type)} is not a FixedSizeList or FixedSizeBinary`, { field: "embedding" });
  }
  let d = dtype === "binary" ? width * 8 : width;
  const dims = meta.get("densewire.dimensions");
  if (dims !== undefined) {
    const v = /^(0|[1-9][0-9]*)$/.test(dims) ? Number(dims) : NaN;
    if (!Number.isSafeInteger(v) || rowBytes(dtype, v) !== rowBytes(dtype, d)) {
      throw new DensewireError("invalid_field", `${JSON.stringify(dims)} disagrees with the column type ${String(type)}`, { field: "densewire.dimensions" });
    }
    d = v;
  }

  const n = table.numRows;
  const parts: Tensor["data"][] = [];
  for (const batch of table.batches) {
    const data = batch.data.children[col]!;
    if (data.nullCount > 0) throw new DensewireError("invalid_field", "the column holds nulls", { field: "embedding" });
    let values: Tensor["data"];
    let start: number;
    if (dtype === "binary") {
      values = data.values as Uint8Array;
      start = data.offset * width;
    } else {
      const child = data.children[0]!;
      values = child.values as Tensor["data"];
      start = child.offset + data.offset * width;
    }
    if (dtype === "float16" && !(values instanceof Uint16Array)) {
      values = new Uint16Array(values.buffer, values.byteOffset, values.length); // a runtime Float16Array: same bits
    }
    parts.push(values.subarray(start, start + data.length * width));
  }
  let out: Tensor["data"];
  if (parts.length === 1) {
    out = parts[0]!;
  } else {
    out = allocData(dtype, n * width);
    let at = 0;
    for (const p of parts) {
      (out as Uint8Array).set(p as Uint8Array, at);
      at += p.length;
    }
  }
  if (out.byteLength < n * rowBytes(dtype, d)) {
    // SPEC.md section 10: a buffer shorter than the batch's rows need is malformed (structure)
    throw new DensewireError("malformed", `the embedding buffers hold ${out.byteLength} bytes, ${n} rows need ${n * rowBytes(dtype, d)}`);
  }
  checkLength(out.byteLength, n * rowBytes(dtype, d), "embedding");
  const result = { dtype, shape: [n, d], data: out } as Embeddings;
  const model = meta.get("densewire.model");
  if (model !== undefined) result.model = model;
  const pt = meta.get("densewire.prompt_tokens");
  const tt = meta.get("densewire.total_tokens");
  // SPEC.md section 10: counts are decimal; "many" or "6.4e1" is invalid_field on the key
  for (const [key, v] of [["densewire.prompt_tokens", pt], ["densewire.total_tokens", tt]] as const) {
    if (v !== undefined && !/^[0-9]+$/.test(v)) throw new DensewireError("invalid_field", `must be a decimal count, got ${JSON.stringify(v)}`, { field: key });
  }
  if (pt !== undefined && tt !== undefined) result.usage = { prompt_tokens: Number(pt), total_tokens: Number(tt) };
  const quantization = meta.get("densewire.quantization");
  if (quantization !== undefined) result.quantization = quantization;
  return result;
}

/**
 * Values as apache-arrow's writer needs them: a view into a larger buffer is copied. The writer joins
 * the body from the column views and collapses ranges of one buffer that touch or overlap, so views of
 * one decoded body (a table decoded from a stream whose buffers overlap, found by fuzzing) came out
 * shifted, or as a stream that does not read back.
 */
export function ownBuffer<T extends ArrayBufferView>(values: T): T {
  return values.byteOffset === 0 && values.byteLength === values.buffer.byteLength ? values : (values as unknown as { slice(): T }).slice();
}

/** Encodes a tensor as an Arrow IPC stream: one schema, one record batch, end-of-stream. */
export async function encodeArrow(
  tensor: Tensor | Embeddings,
  options: { model?: string; usage?: Usage; quantization?: string } = {},
): Promise<Uint8Array> {
  const A = await loadArrow();
  const { dtype } = tensor;
  if (!isDType(dtype)) parseDType(dtype);
  const [n, d] = tensor.shape;
  checkLength(tensor.data.byteLength, n * rowBytes(dtype, d), "data");
  const data = ownBuffer(tensor.data);
  const model = options.model ?? (tensor as Embeddings).model;
  const usage = options.usage ?? (tensor as Embeddings).usage;
  const quantization = checkQuantization(options.quantization ?? (tensor as Embeddings).quantization);

  let type;
  let column;
  if (dtype === "binary") {
    type = new A.FixedSizeBinary(rowBytes(dtype, d));
    column = A.makeData({ type, length: n, nullCount: 0, data: bytesOf(data, 1) });
  } else {
    const inner = innerType(A, dtype);
    type = new A.FixedSizeList(d, new A.Field("item", inner, false));
    // little-endian hosts: the tensor's own typed array, no copy when it owns its buffer
    const values = new (inner.ArrayType as new (b: ArrayBufferLike, o: number, l: number) => Tensor["data"])(
      data.buffer,
      data.byteOffset,
      data.byteLength / DTYPES[dtype].itemBytes,
    );
    const child = A.makeData({ type: inner, length: n * d, nullCount: 0, data: values } as never);
    column = A.makeData({ type, length: n, nullCount: 0, child } as never);
  }
  const field = new A.Field("embedding", type, false, new Map([["densewire.dtype", dtype]]));
  const meta = new Map([
    ["densewire.version", "1"],
    ["densewire.dtype", dtype],
    ["densewire.dimensions", String(d)],
  ]);
  if (model !== undefined) meta.set("densewire.model", model);
  if (usage !== undefined) {
    meta.set("densewire.prompt_tokens", String(usage.prompt_tokens));
    meta.set("densewire.total_tokens", String(usage.total_tokens));
  }
  if (quantization !== undefined) meta.set("densewire.quantization", quantization);
  const schema = new A.Schema([field], meta);
  const struct = A.makeData({ type: new A.Struct([field]), length: n, nullCount: 0, children: [column] });
  const batch = new A.RecordBatch(schema, struct as never);
  return A.RecordBatchStreamWriter.writeAll([batch]).toUint8Array(true);
}
