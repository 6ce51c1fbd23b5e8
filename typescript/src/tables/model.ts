/**
 * Tables (SPEC.md section 15): the column types, the columnar {@link Table} every decoder returns, the
 * `Densewire-Columns` header, UUID helpers and byte-stream-split.
 *
 * A table is `n` rows of named, typed columns, held column by column:
 *
 * | type         | `values`                           | notes |
 * |--------------|------------------------------------|-------|
 * | `bool`       | `Uint8Array`                       | one byte a row, 0 or 1 |
 * | `int32`      | `Int32Array`                       | |
 * | `int64`      | `BigInt64Array`                    | |
 * | `float32`    | `Float32Array`                     | |
 * | `float64`    | `Float64Array`                     | |
 * | `string`     | `string[]`                         | |
 * | `uuid`       | `Uint8Array` of `n * 16` bytes     | RFC 9562 byte order; `uuidToString(values, row)` |
 * | `float32[d]` | `Float32Array` of `n * d` items    | row-major; `dimensions` is `d` |
 */
import { DensewireError } from "../errors.js";
import { LITTLE_ENDIAN_HOST, describe } from "../dtypes.js";
import { type HeadersInput, getHeader } from "../raw.js";

/** The fixed column type names of SPEC.md section 15.1 (vectors are `float32[d]`). */
export type ScalarColumnType = "bool" | "int32" | "int64" | "float32" | "float64" | "string" | "uuid";
/** A vector column type, `float32[d]` with `d >= 1` in decimal. */
export type VectorColumnType = `float32[${number}]`;
/** Any column type name of SPEC.md section 15.1. */
export type ColumnType = ScalarColumnType | VectorColumnType;

/** The typed array (or list) holding each fixed type's values. */
export interface ColumnArrays {
  bool: Uint8Array;
  int32: Int32Array;
  int64: BigInt64Array;
  float32: Float32Array;
  float64: Float64Array;
  string: string[];
  uuid: Uint8Array;
}

/**
 * One column: its name, type and values. A union discriminated by `type`: `if (c.type === "float64")`
 * narrows `c.values` to `Float64Array`; vector columns carry `dimensions`.
 */
export type TableColumn =
  | { [T in ScalarColumnType]: { name: string; type: T; values: ColumnArrays[T]; dimensions?: undefined } }[ScalarColumnType]
  | { name: string; type: VectorColumnType; values: Float32Array; dimensions: number };

/** A decoded table (SPEC.md section 15.8): its name, row count and columns in order. */
export interface Table {
  name: string;
  rows: number;
  columns: TableColumn[];
}

/** A column's name and type, as `Densewire-Columns` and the JSON layouts carry them. */
export interface ColumnSpec {
  name: string;
  type: ColumnType;
}

/** The table formats in the server's order of preference at equal q (SPEC.md section 15.9). */
export type TableFormat = "json" | "json-rows" | "json-columns" | "csv" | "msgpack" | "protobuf" | "arrow";

/** The table formats, in the server's order (SPEC.md section 15.9). */
export const TABLE_FORMATS: readonly TableFormat[] = Object.freeze([
  "json",
  "json-rows",
  "json-columns",
  "csv",
  "msgpack",
  "protobuf",
  "arrow",
] as TableFormat[]);

/** The media type of each table format. */
export const TABLE_MEDIA_TYPES: Readonly<Record<TableFormat, string>> = Object.freeze({
  json: "application/json",
  "json-rows": "application/vnd.densewire.rows+json",
  "json-columns": "application/vnd.densewire.columns+json",
  csv: "text/csv",
  msgpack: "application/vnd.msgpack",
  protobuf: "application/protobuf",
  arrow: "application/vnd.apache.arrow.stream",
});

const BY_MEDIA_TYPE: Readonly<Record<string, TableFormat>> = Object.freeze({
  "application/json": "json",
  "application/vnd.densewire.rows+json": "json-rows",
  "application/vnd.densewire.columns+json": "json-columns",
  "text/csv": "csv",
  "application/vnd.msgpack": "msgpack",
  "application/msgpack": "msgpack",
  "application/x-msgpack": "msgpack",
  "application/protobuf": "protobuf",
  "application/x-protobuf": "protobuf",
  "application/vnd.apache.arrow.stream": "arrow",
});

/** The table format of a `Content-Type` value (parameters and case ignored, aliases included), or undefined. */
export function tableFormatOfContentType(contentType: string | null | undefined): TableFormat | undefined {
  if (!contentType) return undefined;
  return BY_MEDIA_TYPE[contentType.split(";", 1)[0]!.trim().toLowerCase()];
}

const SCALAR: ReadonlySet<string> = new Set(["bool", "int32", "int64", "float32", "float64", "string", "uuid"]);
const VECTOR = /^float32\[([1-9][0-9]*)\]$/;

/** Bytes per value of a fixed-width type (`4d` for `float32[d]`); 0 for `string`. */
export function typeWidth(type: ColumnType): number {
  switch (type) {
    case "bool":
      return 1;
    case "int32":
    case "float32":
      return 4;
    case "int64":
    case "float64":
      return 8;
    case "uuid":
      return 16;
    case "string":
      return 0;
    default:
      return 4 * vectorDimensions(type);
  }
}

/** `d` of a `float32[d]` type name, or 0 for every other type. */
export function vectorDimensions(type: string): number {
  const m = VECTOR.exec(type);
  return m === null ? 0 : Number(m[1]);
}

/** True if `name` is a column type name of SPEC.md section 15.1 (exact, lowercase). */
export function isColumnType(name: unknown): name is ColumnType {
  if (typeof name !== "string") return false;
  if (SCALAR.has(name)) return true;
  const d = vectorDimensions(name);
  return d > 0 && Number.isSafeInteger(d) && d <= 0x7fffffff;
}

/** Checks a column type name: `unknown_dtype` on `field` for any other string, `invalid_field` for a non-string. */
export function parseColumnType(name: unknown, field = "type"): ColumnType {
  if (isColumnType(name)) return name;
  if (typeof name !== "string") throw new DensewireError("invalid_field", `must be a column type name, got ${describe(name)}`, { field });
  throw new DensewireError(
    "unknown_dtype",
    `unknown column type ${JSON.stringify(name)} (expected bool, int32, int64, float32, float64, string, uuid or float32[d])`,
    { field },
  );
}

// ------------------------------------------------------------------------------ Densewire-Columns

const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/** Percent-encodes a column name as `Densewire-Columns` does (RFC 3986: all but `A–Z a–z 0–9 - . _ ~`). */
export function encodeColumnName(name: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(name)) {
    const c = String.fromCharCode(b);
    out += b < 0x80 && UNRESERVED.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/**
 * Parses a `Densewire-Columns` header value (SPEC.md section 15.2): `name=type` entries joined by `,`,
 * names percent-encoded. Errors: `invalid_field` on `Densewire-Columns` for an entry without `=`, a bad
 * percent escape (or one that is not UTF-8), an empty or repeated name; `unknown_dtype` for an unknown
 * type. An empty value is a table without columns.
 */
export function parseColumnsHeader(value: string): ColumnSpec[] {
  const field = "Densewire-Columns";
  if (typeof value !== "string") throw new DensewireError("invalid_field", `must be a string, got ${describe(value)}`, { field });
  const text = value.trim();
  if (text === "") return [];
  const out: ColumnSpec[] = [];
  const seen = new Set<string>();
  for (const entry of text.split(",")) {
    const eq = entry.indexOf("=");
    if (eq < 0) throw new DensewireError("invalid_field", `entry ${JSON.stringify(entry)} has no "=" (expected name=type)`, { field });
    const raw = entry.slice(0, eq);
    let name: string;
    if (/%(?![0-9A-Fa-f]{2})/.test(raw)) throw new DensewireError("invalid_field", `bad percent escape in ${JSON.stringify(raw)}`, { field });
    try {
      name = decodeURIComponent(raw);
    } catch {
      throw new DensewireError("invalid_field", `percent escapes in ${JSON.stringify(raw)} are not UTF-8`, { field });
    }
    if (name === "") throw new DensewireError("invalid_field", `entry ${JSON.stringify(entry)} has an empty column name`, { field });
    if (seen.has(name)) throw new DensewireError("invalid_field", `column ${JSON.stringify(name)} appears twice`, { field });
    seen.add(name);
    out.push({ name, type: parseColumnType(entry.slice(eq + 1), field) });
  }
  return out;
}

/** The `Densewire-Columns` value of a table or of column specs (SPEC.md section 15.2). */
export function columnsHeader(columns: Table | readonly ColumnSpec[]): string {
  const list = Array.isArray(columns) ? (columns as readonly ColumnSpec[]) : (columns as Table).columns;
  return list.map((c) => `${encodeColumnName(c.name)}=${c.type}`).join(",");
}

/** The headers of SPEC.md section 15.2 for a table. */
export function tableHeaders(table: Table): Record<string, string> {
  return {
    "Densewire-Version": "1",
    "Densewire-Table": table.name,
    "Densewire-Rows": String(table.rows),
    "Densewire-Columns": columnsHeader(table),
  };
}

/** What a decoder needs to know beside the body, from headers or from the caller. */
export interface TableDecodeOptions {
  /**
   * The schema, for JSON objects and CSV (which carry no types): column specs, or a `Densewire-Columns`
   * value. Taken from `headers` when omitted. Ignored by the other formats.
   */
  columns?: readonly ColumnSpec[] | string;
  /** The table's name for JSON objects and CSV (which carry none); `Densewire-Table` of `headers`, else "". */
  name?: string;
  /** Response headers: `Densewire-Columns`, `Densewire-Table`, `Densewire-Rows` are read from them. */
  headers?: HeadersInput;
}

const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true });

/** The text of a CSV or JSON body given as a string or UTF-8 bytes; `malformed` for invalid UTF-8. */
export function bodyText(input: string | Uint8Array | ArrayBuffer, format: string): string {
  if (typeof input === "string") return input;
  try {
    return utf8.decode(input);
  } catch (e) {
    throw new DensewireError("malformed", `the ${format} body is not valid UTF-8`, {}, { cause: e });
  }
}

/** The schema for a format without types: from `options.columns`, else the `Densewire-Columns` header. */
export function schemaOf(options: TableDecodeOptions, format: string): ColumnSpec[] {
  const given = options.columns ?? (options.headers !== undefined ? getHeader(options.headers, "Densewire-Columns") : undefined);
  if (given === undefined) {
    throw new DensewireError("invalid_field", `${format} carries no column types: pass options.columns or the response headers`, {
      field: "Densewire-Columns",
    });
  }
  if (typeof given === "string") return parseColumnsHeader(given);
  const seen = new Set<string>();
  return given.map((c, i) => {
    if (typeof c?.name !== "string" || c.name === "" || seen.has(c.name)) {
      throw new DensewireError("invalid_field", `column ${i} needs a unique non-empty name`, { field: `columns[${i}].name` });
    }
    seen.add(c.name);
    return { name: c.name, type: parseColumnType(c.type, `columns[${i}].type`) };
  });
}

/** The table name for a format without one: `options.name`, else `Densewire-Table`, else "". */
export function nameOf(options: TableDecodeOptions): string {
  if (options.name !== undefined) return options.name;
  return (options.headers !== undefined ? getHeader(options.headers, "Densewire-Table") : undefined) ?? "";
}

/** `shape_mismatch` when the headers state a `Densewire-Rows` other than the decoded count. */
export function checkRowsHeader(options: TableDecodeOptions, rows: number): void {
  if (options.headers === undefined) return;
  const v = getHeader(options.headers, "Densewire-Rows");
  if (v === undefined) return;
  if (!/^(0|[1-9][0-9]*)$/.test(v.trim())) throw new DensewireError("invalid_field", `must be a decimal count, got ${JSON.stringify(v)}`, { field: "Densewire-Rows" });
  if (Number(v.trim()) !== rows) {
    throw new DensewireError("shape_mismatch", `the header says ${v.trim()} rows, the body holds ${rows}`, { field: "Densewire-Rows" });
  }
}

// ------------------------------------------------------------------------------ columns and tables

/** A new column of `n` rows of a type, zero-filled (strings empty). */
export function allocColumn(name: string, type: ColumnType, n: number): TableColumn {
  switch (type) {
    case "bool":
      return { name, type, values: new Uint8Array(n) };
    case "int32":
      return { name, type, values: new Int32Array(n) };
    case "int64":
      return { name, type, values: new BigInt64Array(n) };
    case "float32":
      return { name, type, values: new Float32Array(n) };
    case "float64":
      return { name, type, values: new Float64Array(n) };
    case "string":
      return { name, type, values: new Array<string>(n).fill("") };
    case "uuid":
      return { name, type, values: new Uint8Array(n * 16) };
    default: {
      const d = vectorDimensions(type);
      return { name, type, values: new Float32Array(n * d), dimensions: d };
    }
  }
}

const CTORS = {
  bool: Uint8Array,
  int32: Int32Array,
  int64: BigInt64Array,
  float32: Float32Array,
  float64: Float64Array,
  uuid: Uint8Array,
} as const;

/**
 * A fixed-width column over little-endian `bytes` (already checked to hold `n * width` bytes): a view
 * when `bytes.byteOffset` is a multiple of the item size, one aligned copy otherwise.
 */
export function columnOfBytes(name: string, type: ColumnType, bytes: Uint8Array): TableColumn {
  if (type === "string") throw new TypeError("string columns have no fixed width");
  const d = vectorDimensions(type);
  const Ctor = d > 0 ? Float32Array : CTORS[type as Exclude<ScalarColumnType, "string">];
  const size = Ctor.BYTES_PER_ELEMENT;
  const src = bytes.byteOffset % size === 0 ? bytes : bytes.slice();
  const values = new Ctor(src.buffer as ArrayBuffer, src.byteOffset, src.length / size);
  return (d > 0 ? { name, type, values, dimensions: d } : { name, type, values }) as TableColumn;
}

/** The little-endian bytes of a fixed-width column's values (a view of its memory). */
export function columnBytes(column: TableColumn): Uint8Array {
  if (column.type === "string") throw new TypeError("string columns have no fixed width");
  const v = column.values as Exclude<TableColumn["values"], string[]>;
  return new Uint8Array(v.buffer as ArrayBuffer, v.byteOffset, v.byteLength);
}

/** Items a column's `values` hold for `n` rows (`16n` for uuid, `dn` for vectors). */
function valueCount(type: ColumnType, n: number): number {
  if (type === "uuid") return 16 * n;
  const d = vectorDimensions(type);
  return d > 0 ? d * n : n;
}

/**
 * Builds a table, checking it as encoders need: names unique and non-empty, types valid, every
 * column the right array type and length (`invalid_field` / `shape_mismatch` naming the column).
 */
export function makeTable(name: string, columns: readonly TableColumn[]): Table {
  const seen = new Set<string>();
  let rows: number | undefined;
  const out: TableColumn[] = [];
  columns.forEach((c, i) => {
    if (typeof c.name !== "string" || c.name === "" || seen.has(c.name)) {
      throw new DensewireError("invalid_field", `column ${i} needs a unique non-empty name, got ${describe(c.name)}`, { field: `columns[${i}].name` });
    }
    seen.add(c.name);
    const type = parseColumnType(c.type, `columns[${i}].type`);
    const d = vectorDimensions(type);
    const expected = type === "string" ? Array : d > 0 ? Float32Array : CTORS[type as Exclude<ScalarColumnType, "string">];
    if (!(c.values instanceof (expected as unknown as typeof Array))) {
      throw new DensewireError("invalid_field", `values of a ${type} column must be a ${expected.name}, got ${describe(c.values)}`, { field: c.name });
    }
    const per = valueCount(type, 1);
    if (c.values.length % per !== 0) {
      throw new DensewireError("shape_mismatch", `${c.values.length} values is not a whole number of ${type} rows`, { field: c.name });
    }
    const n = c.values.length / per;
    if (rows !== undefined && n !== rows) throw new DensewireError("shape_mismatch", `${n} rows where the first column has ${rows}`, { field: c.name });
    rows = n;
    out.push((d > 0 ? { name: c.name, type, values: c.values, dimensions: d } : { name: c.name, type, values: c.values }) as TableColumn);
  });
  return { name, rows: rows ?? 0, columns: out };
}

/** The column named `name`, or undefined. */
export function tableColumn(table: Table, name: string): TableColumn | undefined {
  return table.columns.find((c) => c.name === name);
}

// ------------------------------------------------------------------------------ UUID

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** The canonical lowercase text of the UUID at `row` of a uuid column's bytes (`n * 16`). */
export function uuidToString(bytes: Uint8Array, row = 0): string {
  const o = row * 16;
  if (!Number.isInteger(row) || row < 0 || o + 16 > bytes.length) throw new RangeError(`row ${row} out of range [0, ${Math.floor(bytes.length / 16)})`);
  const h = (i: number) => HEX[bytes[o + i]!]!;
  return (
    h(0) + h(1) + h(2) + h(3) + "-" + h(4) + h(5) + "-" + h(6) + h(7) + "-" + h(8) + h(9) + "-" +
    h(10) + h(11) + h(12) + h(13) + h(14) + h(15)
  );
}

/** Hex digit values by character code (-1 for anything else, 128 entries). */
const HEX_VALUE = /*@__PURE__*/ (() => {
  const t = new Int8Array(128).fill(-1);
  for (let i = 0; i < 10; i++) t[48 + i] = i;
  for (let i = 0; i < 6; i++) t[65 + i] = t[97 + i] = 10 + i;
  return t;
})();

function hexValue(c: number): number {
  return c < 128 ? HEX_VALUE[c]! : -1;
}

/**
 * Writes the 16 bytes of a UUID's canonical text (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hex in
 * either case) into `out` at `offset`. Returns false if the text is not a canonical UUID.
 */
export function parseUuidInto(text: string, out: Uint8Array, offset: number): boolean {
  if (text.length !== 36) return false;
  if (text.charCodeAt(8) !== 45 || text.charCodeAt(13) !== 45 || text.charCodeAt(18) !== 45 || text.charCodeAt(23) !== 45) return false;
  let j = offset;
  for (let i = 0; i < 36; i += 2) {
    if (i === 8 || i === 13 || i === 18 || i === 23) i++;
    const hi = hexValue(text.charCodeAt(i));
    const lo = hexValue(text.charCodeAt(i + 1));
    if (hi < 0 || lo < 0) return false;
    out[j++] = (hi << 4) | lo;
  }
  return true;
}

/** The 16 bytes of a UUID's canonical text (either case); `invalid_field` on `field` otherwise. */
export function parseUuid(text: string, field = "uuid"): Uint8Array {
  const out = new Uint8Array(16);
  if (typeof text !== "string" || !parseUuidInto(text, out, 0)) {
    throw new DensewireError("invalid_field", `not a canonical UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): ${describe(text)}`, { field });
  }
  return out;
}

// ------------------------------------------------------------------------------ byte-stream-split

/**
 * Undoes Parquet's BYTE_STREAM_SPLIT (SPEC.md section 15.6): `m` items of `w` bytes, byte `k` of item
 * `i` at `data[k * m + i]`. Returns the items little-endian in a new (aligned) buffer.
 *
 * For widths that are a multiple of 4 (every width the spec allows: 4, 8, 16, 4d) on a little-endian
 * host, one tight loop per group of 4 byte streams assembles each 32-bit word of the output from 4
 * streams read in step and writes it whole. Measured in Node 20 on 67,627 items against one loop per
 * byte stream (read a stream, write its bytes `w` apart) and against per-stream subarrays: about 2x
 * faster than both for w = 4, 8 and 16 (w = 8: 0.27 ms against 0.65 ms). Other widths, and
 * big-endian hosts, take the per-stream loop.
 */
export function byteStreamUnsplit(data: Uint8Array, w: number): Uint8Array {
  const m = data.length / w;
  const out = new Uint8Array(data.length);
  if (w % 4 === 0 && LITTLE_ENDIAN_HOST) {
    const o32 = new Uint32Array(out.buffer, 0, data.length >>> 2);
    const words = w >>> 2;
    for (let q = 0; q < words; q++) {
      const s0 = 4 * q * m;
      const s1 = s0 + m;
      const s2 = s1 + m;
      const s3 = s2 + m;
      for (let i = 0, o = q; i < m; i++, o += words) {
        o32[o] = data[s0 + i]! | (data[s1 + i]! << 8) | (data[s2 + i]! << 16) | (data[s3 + i]! << 24);
      }
    }
    return out;
  }
  for (let k = 0; k < w; k++) {
    const base = k * m;
    for (let i = 0, o = k; i < m; i++, o += w) out[o] = data[base + i]!;
  }
  return out;
}

/** Applies BYTE_STREAM_SPLIT to `m` items of `w` bytes, little-endian (the encoder's side). */
export function byteStreamSplit(bytes: Uint8Array, w: number): Uint8Array {
  const m = bytes.length / w;
  const out = new Uint8Array(bytes.length);
  for (let k = 0; k < w; k++) {
    const base = k * m;
    for (let i = 0, o = k; i < m; i++, o += w) out[base + i] = bytes[o]!;
  }
  return out;
}

/** Checks bool bytes: `invalid_field` on `FIELD[ROW]` for the first byte other than 0 or 1. */
export function checkBoolBytes(bytes: Uint8Array, field: string): void {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i]! > 1) throw new DensewireError("invalid_field", `bool byte 0x${bytes[i]!.toString(16).padStart(2, "0")} (must be 0 or 1)`, { field: `${field}[${i}]` });
  }
}

/** `length_mismatch` on `field` at `min(actual, expected)` when a fixed-width column has the wrong byte length. */
export function checkDataLength(actual: number, expected: number, field: string): void {
  if (actual !== expected) {
    throw new DensewireError(
      "length_mismatch",
      `${actual} bytes of data where ${expected} are needed (${actual < expected ? "missing" : "in excess"} from byte ${Math.min(actual, expected)})`,
      { offset: Math.min(actual, expected), field },
    );
  }
}
