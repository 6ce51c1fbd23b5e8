/**
 * Columnar Protobuf (SPEC.md section 15.6): the message `densewire.v1.Table` of
 * proto/densewire/v1/table.proto. Fixed-width `data` is PLAIN (values one after another) or
 * BYTE_STREAM_SPLIT (Parquet's encoding, which densewire's server writes for float columns);
 * strings are concatenated UTF-8 with `lengths`.
 *
 * Decoding uses a hand-written wire-format reader, as the tensor decoder does, rather than
 * @bufbuild/protobuf's `fromBinary(TableSchema, …)`: the spec's errors need the offending tag's offset
 * and the `truncated`/`malformed` distinction, and the reader builds no message objects. PLAIN columns
 * are **views** over the body when their `data` is aligned for the type (always for bool and uuid),
 * one copy otherwise; BYTE_STREAM_SPLIT columns are reassembled into one new buffer. Encoding uses the
 * generated code (`TableSchema`, exported as `pb.TableSchema`) and `toBinary`, the official proto3
 * serializer rules, so bodies are byte-exact.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { DensewireError } from "../errors.js";
import { ColumnEncoding, ColumnSchema, type ColumnType as PbColumnType, TableSchema } from "../gen/densewire/v1/table_pb.js";
import { Reader } from "../pbwire.js";
import {
  type ColumnType,
  type Table,
  type TableColumn,
  byteStreamSplit,
  byteStreamUnsplit,
  checkBoolBytes,
  checkDataLength,
  columnBytes,
  columnOfBytes,
  typeWidth,
  vectorDimensions,
} from "./model.js";

// ignoreBOM: a string that starts with U+FEFF keeps it (the default would drop it as a byte order mark)
const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The type names in `ColumnType` enum order (1..7; 8 is `float32[dimensions]`). */
const TYPE_NAMES = ["", "bool", "int32", "int64", "float32", "float64", "string", "uuid"] as const;

interface ColumnFields {
  name: string;
  type: number;
  dimensions: number;
  encoding: number;
  data: [number, number] | undefined;
  lengths: number[];
}

const COLUMN_FIELDS = ["", "name", "type", "dimensions", "encoding", "data", "lengths"];

function readColumn(r: Reader, end: number, at: string): ColumnFields {
  const c: ColumnFields = { name: "", type: 0, dimensions: 0, encoding: 0, data: undefined, lengths: [] };
  while (r.pos < end) {
    const tagPos = r.pos;
    const [field, wt] = r.tag(end);
    if (field >= 1 && field <= 6) {
      const want = field === 1 || field === 5 ? 2 : field === 6 ? -1 : 0;
      if ((want >= 0 && wt !== want) || (want < 0 && wt !== 0 && wt !== 2)) {
        throw r.malformed(tagPos, `wire type ${wt} for the field ${COLUMN_FIELDS[field]}`, `${at}.${COLUMN_FIELDS[field]}`);
      }
    }
    switch (field) {
      case 1: {
        const [s, e] = r.delimited(end, tagPos);
        try {
          c.name = utf8.decode(r.b.subarray(s, e));
        } catch {
          throw r.malformed(tagPos, "the column name is not valid UTF-8", `${at}.name`);
        }
        break;
      }
      case 2:
        c.type = r.varint(end);
        break;
      case 3:
        c.dimensions = r.varint(end);
        break;
      case 4:
        c.encoding = r.varint(end);
        break;
      case 5:
        c.data = r.delimited(end, tagPos);
        break;
      case 6:
        if (wt === 0) {
          c.lengths.push(r.varint(end));
        } else {
          const [s, e] = r.delimited(end, tagPos);
          r.pos = s;
          while (r.pos < e) {
            let q = r.pos;
            while (q < e && r.b[q]! & 0x80 && q - r.pos < 10) q++;
            if (q >= e) throw r.malformed(tagPos, "a packed length runs past the end of its field", `${at}.lengths`);
            c.lengths.push(r.varint(e));
          }
        }
        break;
      default:
        r.skip(wt, field, end, tagPos);
    }
  }
  return c;
}

function finishColumn(b: Uint8Array, c: ColumnFields, n: number, at: string): TableColumn {
  if (c.type === 0) throw new DensewireError("invalid_field", "absent or 0 (COLUMN_TYPE_UNSPECIFIED)", { field: `${at}.type` });
  if (c.type > 8) throw new DensewireError("unknown_dtype", `unknown ColumnType enum value ${c.type}`, { field: `${at}.type` });
  if (c.name === "") throw new DensewireError("invalid_field", "a column needs a non-empty name", { field: `${at}.name` });
  let type: ColumnType;
  if (c.type === 8) {
    if (c.dimensions === 0 || c.dimensions > 0x7fffffff) {
      throw new DensewireError("invalid_field", `a float32 vector column needs dimensions >= 1, got ${c.dimensions}`, { field: `${at}.dimensions` });
    }
    type = `float32[${c.dimensions}]`;
  } else {
    if (c.dimensions !== 0) throw new DensewireError("invalid_field", `dimensions ${c.dimensions} on a ${TYPE_NAMES[c.type]} column`, { field: `${at}.dimensions` });
    type = TYPE_NAMES[c.type] as ColumnType;
  }
  if (c.encoding > 1) throw new DensewireError("invalid_field", `unknown ColumnEncoding enum value ${c.encoding}`, { field: `${at}.encoding` });
  if (c.encoding === 1 && (type === "bool" || type === "string")) {
    throw new DensewireError("invalid_field", `BYTE_STREAM_SPLIT is not valid on a ${type} column`, { field: `${at}.encoding` });
  }
  const data = c.data === undefined ? b.subarray(0, 0) : b.subarray(c.data[0], c.data[1]);
  if (type === "string") return { name: c.name, type, values: readStrings(data, c.lengths, n, at) };
  checkDataLength(data.length, n * typeWidth(type), `${at}.data`);
  if (type === "bool") checkBoolBytes(data, `${at}.data`);
  if (c.encoding === 1) {
    const d = vectorDimensions(type);
    return columnOfBytes(c.name, type, byteStreamUnsplit(data, d > 0 ? 4 : typeWidth(type)));
  }
  return columnOfBytes(c.name, type, data);
}

/** Splits concatenated UTF-8 by byte lengths: one decode and substrings when all ASCII, else one decode a value. */
function readStrings(data: Uint8Array, lengths: number[], n: number, at: string): string[] {
  if (lengths.length !== n) throw new DensewireError("shape_mismatch", `${lengths.length} lengths in a table of ${n} rows`, { field: `${at}.lengths` });
  let total = 0;
  for (let i = 0; i < n; i++) total += lengths[i]!;
  if (total !== data.length) {
    throw new DensewireError("length_mismatch", `the lengths sum to ${total} bytes, data holds ${data.length}`, { offset: Math.min(total, data.length), field: `${at}.data` });
  }
  const out = new Array<string>(n);
  let ascii = true;
  for (let i = 0; i < data.length; i++) {
    if (data[i]! >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {
    const text = utf8.decode(data);
    for (let i = 0, p = 0; i < n; i++) {
      const e = p + lengths[i]!;
      out[i] = text.slice(p, e);
      p = e;
    }
    return out;
  }
  for (let i = 0, p = 0; i < n; i++) {
    const e = p + lengths[i]!;
    try {
      out[i] = utf8.decode(data.subarray(p, e));
    } catch {
      throw new DensewireError("malformed", `value ${i} is not valid UTF-8 (bytes ${p} to ${e} of data)`, { field: `${at}.data` });
    }
    p = e;
  }
  return out;
}

/**
 * Decodes a columnar Protobuf table. Errors: `malformed` at the offending tag or varint (or on
 * `columns[COL].data` for invalid UTF-8), `truncated` at the body's length, `invalid_field` on
 * `columns[COL].type` (absent), `.dimensions`, `.encoding`, `.name`, `columns[COL].data[ROW]` (a bool
 * byte other than 0 or 1) or `rows` (beyond 2^53); `unknown_dtype` on `columns[COL].type`;
 * `length_mismatch` on `columns[COL].data`; `shape_mismatch` on `columns[COL].lengths`.
 */
export function decodeTableProtobuf(body: Uint8Array | ArrayBuffer): Table {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const r = new Reader(bytes);
  const end = bytes.length;
  let name = "";
  let rows = 0;
  const raw: ColumnFields[] = [];
  while (r.pos < end) {
    const tagPos = r.pos;
    const [field, wt] = r.tag(end);
    if (field === 1) {
      if (wt !== 2) throw r.malformed(tagPos, `wire type ${wt} for the string field`, "name");
      const [s, e] = r.delimited(end, tagPos);
      try {
        name = utf8.decode(bytes.subarray(s, e));
      } catch {
        throw r.malformed(tagPos, "the table name is not valid UTF-8", "name");
      }
    } else if (field === 2) {
      if (wt !== 0) throw r.malformed(tagPos, `wire type ${wt} for the varint field`, "rows");
      rows = r.varint(end);
    } else if (field === 3) {
      if (wt !== 2) throw r.malformed(tagPos, `wire type ${wt} for the message field`, `columns[${raw.length}]`);
      const [s, e] = r.delimited(end, tagPos);
      r.pos = s;
      raw.push(readColumn(r, e, `columns[${raw.length}]`));
    } else {
      r.skip(wt, field, end, tagPos);
    }
  }
  if (!Number.isSafeInteger(rows)) throw new DensewireError("invalid_field", `${rows} rows is beyond what this decoder can hold`, { field: "rows" });
  const seen = new Set<string>();
  const columns = raw.map((c, i) => {
    const col = finishColumn(bytes, c, rows, `columns[${i}]`);
    if (seen.has(col.name)) throw new DensewireError("invalid_field", `column ${JSON.stringify(col.name)} appears twice`, { field: `columns[${i}].name` });
    seen.add(col.name);
    return col;
  });
  return { name, rows, columns };
}

/** Options of {@link encodeTableProtobuf}. */
export interface TableProtobufOptions {
  /** BYTE_STREAM_SPLIT for every fixed-width column of width ≥ 2, as densewire's server writes (default true). */
  byteStreamSplit?: boolean;
}

/** Encodes a table as columnar Protobuf with the generated `TableSchema` and `toBinary` (byte-exact). */
export function encodeTableProtobuf(table: Table, options: TableProtobufOptions = {}): Uint8Array {
  const split = options.byteStreamSplit ?? true;
  const columns = table.columns.map((c) => {
    const d = vectorDimensions(c.type);
    const typeNumber = (d > 0 ? 8 : TYPE_NAMES.indexOf(c.type as (typeof TYPE_NAMES)[number])) as PbColumnType;
    if (c.type === "string") {
      const enc = new TextEncoder();
      const parts = c.values.map((v) => enc.encode(v));
      const data = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
      let at = 0;
      for (const p of parts) {
        data.set(p, at);
        at += p.length;
      }
      return create(ColumnSchema, { name: c.name, type: typeNumber, data, lengths: parts.map((p) => p.length) });
    }
    const bytes = columnBytes(c);
    const useSplit = split && c.type !== "bool";
    return create(ColumnSchema, {
      name: c.name,
      type: typeNumber,
      dimensions: d,
      encoding: useSplit ? ColumnEncoding.BYTE_STREAM_SPLIT : ColumnEncoding.PLAIN,
      data: useSplit ? byteStreamSplit(bytes, d > 0 ? 4 : typeWidth(c.type)) : bytes,
    });
  });
  return toBinary(TableSchema, create(TableSchema, { name: table.name, rows: BigInt(table.rows), columns }));
}
