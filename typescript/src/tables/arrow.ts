/**
 * Arrow IPC streams of tables (SPEC.md section 15.7), through apache-arrow, the OPTIONAL peer
 * dependency loaded on first use (as for tensors: `setArrowImporter` applies here too); both functions
 * are async for that reason.
 *
 * Columns: Bool, Int32, Int64, Float32, Float64, Utf8 (LargeUtf8 accepted), FixedSizeBinary(16) with
 * the `arrow.uuid` extension, FixedSizeList<Float32, d>; each field carries `densewire.type`, the schema
 * `densewire.version` and `densewire.table`.
 *
 * Decoding: numeric, uuid and vector columns are apache-arrow's value buffers, **views** over the body
 * (Arrow aligns buffers to 8 bytes) when the body itself starts aligned and the stream has one record
 * batch; several batches are concatenated (one copy). Bool columns are unpacked from bits to bytes and
 * strings decoded, so those are new arrays.
 */
import { checkArrowStream } from "../arrowcheck.js";
import { ownBuffer, loadArrow } from "../arrow.js";
import { DensewireError } from "../errors.js";
import {
  type ColumnType,
  type Table,
  type TableColumn,
  type TableDecodeOptions,
  allocColumn,
  columnOfBytes,
  parseColumnType,
  vectorDimensions,
} from "./model.js";

type ArrowModule = typeof import("apache-arrow");
type ArrowData = InstanceType<ArrowModule["Data"]>;

// ignoreBOM: a string that starts with U+FEFF keeps it (the default would drop it as a byte order mark)
const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The densewire type an Arrow type carries, or undefined. */
function typeOfArrow(A: ArrowModule, t: unknown, extension: string | undefined): ColumnType | undefined {
  if (A.DataType.isBool(t)) return "bool";
  if (A.DataType.isInt(t) && t.isSigned) return t.bitWidth === 32 ? "int32" : t.bitWidth === 64 ? "int64" : undefined;
  if (A.DataType.isFloat(t)) return t.precision === A.Precision.SINGLE ? "float32" : t.precision === A.Precision.DOUBLE ? "float64" : undefined;
  if (A.DataType.isUtf8(t) || A.DataType.isLargeUtf8(t)) return "string";
  if (A.DataType.isFixedSizeBinary(t)) return t.byteWidth === 16 && (extension === undefined || extension === "arrow.uuid") ? "uuid" : undefined;
  if (A.DataType.isFixedSizeList(t)) {
    const item = t.children[0]!.type;
    return A.DataType.isFloat(item) && item.precision === A.Precision.SINGLE && t.listSize >= 1 ? `float32[${t.listSize}]` : undefined;
  }
  return undefined;
}

/**
 * One batch's part of a fixed-width column, as little-endian bytes (a view). apache-arrow does not
 * check a buffer against the batch's length (found by fuzzing: a RangeError escaped).
 */
function fixedBytes(data: ArrowData, type: ColumnType, field: string): Uint8Array {
  const d = vectorDimensions(type);
  let values: ArrayBufferView;
  let start: number;
  let count: number;
  if (d > 0) {
    const child = data.children[0]!;
    values = child.values as Float32Array;
    start = child.offset + data.offset * d;
    count = data.length * d;
  } else if (type === "uuid") {
    values = data.values as Uint8Array;
    start = data.offset * 16;
    count = data.length * 16;
  } else {
    values = data.values as ArrayBufferView;
    start = data.offset;
    count = data.length;
  }
  const size = (values as Uint8Array).BYTES_PER_ELEMENT;
  if ((values as Uint8Array).length - start < count) {
    // a buffer reaching past the message body: malformed, as Python's, Ruby's and Go's readers say
    throw new DensewireError("malformed", `the Arrow buffer holds fewer than the ${count * size} bytes ${data.length} rows need (it lies outside the body)`, { field });
  }
  return new Uint8Array(values.buffer, values.byteOffset + start * size, count * size);
}

/**
 * Decodes an Arrow IPC stream of a table. Errors: `malformed` when apache-arrow cannot read it;
 * `invalid_field` on the column's name when its Arrow type does not match its `densewire.type` (or
 * carries no densewire type) or it holds nulls; `unknown_dtype` on `densewire.type`.
 */
export async function decodeTableArrow(body: Uint8Array | ArrayBuffer, options: Pick<TableDecodeOptions, "name"> = {}): Promise<Table> {
  const A = await loadArrow();
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  // every stream opens with a schema message: the continuation marker 0xFFFFFFFF (Arrow >= 0.15) or,
  // in the legacy format, a positive metadata length; apache-arrow reads anything else as an empty table
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const head = bytes.length >= 8 ? dv.getInt32(0, true) : 0;
  if (head !== -1 && !(head > 0)) {
    throw new DensewireError("malformed", "not an Arrow IPC stream (no schema message at the start)", { offset: 0 });
  }
  // (a metadata length past the end is truncated: checkArrowStream, SPEC.md section 10's framing)
  const { unnamed } = checkArrowStream(bytes);
  let t: InstanceType<ArrowModule["Table"]>;
  try {
    t = A.tableFromIPC(bytes);
  } catch (e) {
    throw new DensewireError("malformed", `not a readable Arrow IPC stream: ${(e as Error).message}`, {}, { cause: e });
  }
  if (t.numRows === 0 && countRecordBatches(A, bytes) === 0) {
    // SPEC.md section 15.7: even an empty table has its (empty) record batch (apache-arrow makes one up)
    throw new DensewireError("truncated", "the Arrow stream ends before its first record batch", { offset: bytes.length });
  }
  const n = t.numRows;
  const columns = t.schema.fields.map((field, i): TableColumn => {
    const named = field.metadata.get("densewire.type");
    const actual = typeOfArrow(A, field.type, field.metadata.get("ARROW:extension:name"));
    const type = named !== undefined ? parseColumnType(named, "densewire.type") : actual;
    if (type === undefined || actual !== type) {
      throw new DensewireError("invalid_field", `Arrow type ${String(field.type)} does not carry ${type ?? "a densewire column type"}`, { field: field.name });
    }
    const parts = t.batches.map((b) => b.data.children[i]!);
    for (const p of parts) {
      if (p.nullCount > 0) throw new DensewireError("invalid_field", "the column holds nulls", { field: field.name });
    }
    if (type === "bool" || type === "string") {
      const col = allocColumn(field.name, type, n);
      let r = 0;
      for (const p of parts) {
        if (col.type === "bool") {
          const bits = p.values as Uint8Array;
          for (let j = 0; j < p.length; j++) {
            const k = p.offset + j;
            col.values[r++] = (bits[k >>> 3]! >>> (k & 7)) & 1;
          }
        } else if (col.type === "string") {
          const offs = p.valueOffsets as Int32Array | BigInt64Array;
          const data = p.values as Uint8Array;
          for (let j = 0; j < p.length; j++) {
            const s = Number(offs[p.offset + j]!);
            const e = Number(offs[p.offset + j + 1]!);
            try {
              col.values[r++] = utf8.decode(data.subarray(s, e));
            } catch {
              throw new DensewireError("malformed", `value ${r - 1} is not valid UTF-8`, { field: field.name });
            }
          }
        }
      }
      return col;
    }
    if (parts.length === 1) return columnOfBytes(field.name, type, fixedBytes(parts[0]!, type, field.name));
    const chunks = parts.map((p) => fixedBytes(p, type, field.name));
    const all = new Uint8Array(chunks.reduce((s, c) => s + c.length, 0));
    let at = 0;
    for (const c of chunks) {
      all.set(c, at);
      at += c.length;
    }
    return columnOfBytes(field.name, type, all);
  });
  const name = t.schema.metadata.get("densewire.table") ?? options.name ?? "";
  // SPEC.md section 15.1: names are unique and non-empty; Arrow allows "" and repeats (found by fuzzing)
  const seen = new Set<string>();
  columns.forEach((c, i) => {
    if (c.name === "" || seen.has(c.name) || unnamed.includes(i)) {
      throw new DensewireError("invalid_field", `column ${i} needs a unique non-empty name, got ${unnamed.includes(i) ? "none" : JSON.stringify(c.name)}`, { field: `columns[${i}].name` });
    }
    seen.add(c.name);
  });
  return { name, rows: n, columns };
}

/** The record batch messages of a stream (apache-arrow's readers yield an empty batch when there is none). */
function countRecordBatches(A: ArrowModule, bytes: Uint8Array): number {
  const reader = new A.MessageReader(bytes);
  let batches = 0;
  for (let r = reader.next(); !r.done; r = reader.next()) {
    if (r.value.isRecordBatch()) batches++;
    reader.readMessageBody(r.value.bodyLength);
  }
  return batches;
}

/** Encodes a table as an Arrow IPC stream: one schema, one record batch, end-of-stream. */
export async function encodeTableArrow(table: Table): Promise<Uint8Array> {
  const A = await loadArrow();
  const n = table.rows;
  const fields: InstanceType<ArrowModule["Field"]>[] = [];
  const children: ArrowData[] = [];
  for (const column of table.columns) {
    const c = Array.isArray(column.values) ? column : ({ ...column, values: ownBuffer(column.values) } as TableColumn);
    const meta = new Map([["densewire.type", c.type as string]]);
    let data: ArrowData;
    switch (c.type) {
      case "bool": {
        const bits = new Uint8Array(Math.ceil(n / 8));
        for (let r = 0; r < n; r++) if (c.values[r]) bits[r >>> 3]! |= 1 << (r & 7);
        data = A.makeData({ type: new A.Bool(), length: n, nullCount: 0, data: bits });
        break;
      }
      case "int32":
        data = A.makeData({ type: new A.Int32(), length: n, nullCount: 0, data: c.values });
        break;
      case "int64":
        data = A.makeData({ type: new A.Int64(), length: n, nullCount: 0, data: c.values });
        break;
      case "float32":
        data = A.makeData({ type: new A.Float32(), length: n, nullCount: 0, data: c.values });
        break;
      case "float64":
        data = A.makeData({ type: new A.Float64(), length: n, nullCount: 0, data: c.values });
        break;
      case "string": {
        const enc = new TextEncoder();
        const parts = c.values.map((v) => enc.encode(v));
        const offsets = new Int32Array(n + 1);
        for (let r = 0; r < n; r++) offsets[r + 1] = offsets[r]! + parts[r]!.length;
        const bytes = new Uint8Array(offsets[n]!);
        parts.forEach((p, r) => bytes.set(p, offsets[r]!));
        data = A.makeData({ type: new A.Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data: bytes });
        break;
      }
      case "uuid":
        meta.set("ARROW:extension:name", "arrow.uuid");
        meta.set("ARROW:extension:metadata", "");
        data = A.makeData({ type: new A.FixedSizeBinary(16), length: n, nullCount: 0, data: c.values });
        break;
      default: {
        const d = c.dimensions;
        const item = new A.Float32();
        const child = A.makeData({ type: item, length: n * d, nullCount: 0, data: c.values });
        data = A.makeData({ type: new A.FixedSizeList(d, new A.Field("item", item, false)), length: n, nullCount: 0, child } as never);
      }
    }
    fields.push(new A.Field(c.name, data.type, false, meta));
    children.push(data);
  }
  const schema = new A.Schema(fields, new Map([
    ["densewire.version", "1"],
    ["densewire.table", table.name],
  ]));
  const struct = A.makeData({ type: new A.Struct(fields), length: n, nullCount: 0, children });
  const batch = new A.RecordBatch(schema, struct as never);
  return A.RecordBatchStreamWriter.writeAll([batch]).toUint8Array(true);
}
