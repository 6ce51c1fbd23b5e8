/**
 * The three JSON layouts of a table (SPEC.md section 15.3): objects (`application/json`, one object a
 * row, no types: the schema comes from `Densewire-Columns` or the caller), rows
 * (`application/vnd.densewire.rows+json`) and columns (`application/vnd.densewire.columns+json`).
 *
 * Decoding parses with `JSON.parse` (whose numbers are binary64) and writes each value into its
 * column's typed array, checking its kind and range: an `int64` beyond ±(2^53 − 1) is `invalid_field`
 * rather than a silently rounded value (use CSV or a binary format for such columns). Every result is
 * a fresh array (JSON has no bytes to view).
 */
import { describe } from "../dtypes.js";
import { DensewireError } from "../errors.js";
import {
  type ColumnSpec,
  type Table,
  type TableColumn,
  type TableDecodeOptions,
  allocColumn,
  bodyText,
  checkRowsHeader,
  nameOf,
  parseColumnType,
  parseUuidInto,
  schemaOf,
  uuidToString,
} from "./model.js";


/** JSON text from a string or UTF-8 bytes; `malformed` for invalid UTF-8 or JSON. */
function parse(input: string | Uint8Array | ArrayBuffer): unknown {
  const text = bodyText(input, "JSON");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new DensewireError("malformed", `not valid JSON: ${(e as Error).message}`, {}, { cause: e });
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const OK = 0;
const BAD = 1; // wrong kind or out of range: invalid_field
const SHAPE = 2; // a vector of the wrong length: shape_mismatch
const ITEM = 3; // a vector item of the wrong kind or out of range: invalid_field on the item, badItem
let badItem = 0;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** A function writing one JSON value into row `r` of a column; returns OK, BAD or SHAPE. */
type Setter = (v: unknown, r: number) => number;

function setter(col: TableColumn): Setter {
  switch (col.type) {
    case "bool": {
      const a = col.values;
      return (v, r) => {
        if (v === true) a[r] = 1;
        else if (v !== false) return BAD;
        return OK;
      };
    }
    case "int32": {
      const a = col.values;
      return (v, r) => {
        if (typeof v !== "number" || !Number.isInteger(v) || v < -2147483648 || v > 2147483647) return BAD;
        a[r] = v;
        return OK;
      };
    }
    case "int64": {
      const a = col.values;
      return (v, r) => {
        if (typeof v !== "number" || !Number.isInteger(v) || v < -MAX_SAFE || v > MAX_SAFE) return BAD;
        a[r] = BigInt(v);
        return OK;
      };
    }
    case "float32": {
      const a = col.values;
      return (v, r) => {
        if (typeof v !== "number") return BAD;
        const f = Math.fround(v);
        if (f === Infinity || f === -Infinity) return BAD;
        a[r] = f;
        return OK;
      };
    }
    case "float64": {
      const a = col.values;
      return (v, r) => {
        if (typeof v !== "number" || !Number.isFinite(v)) return BAD;
        a[r] = v;
        return OK;
      };
    }
    case "string": {
      const a = col.values;
      return (v, r) => {
        if (typeof v !== "string") return BAD;
        a[r] = v;
        return OK;
      };
    }
    case "uuid": {
      const a = col.values;
      return (v, r) => (typeof v === "string" && parseUuidInto(v, a, r * 16) ? OK : BAD);
    }
    default: {
      const a = col.values;
      const d = col.dimensions;
      return (v, r) => {
        if (!Array.isArray(v)) return BAD;
        if (v.length !== d) return SHAPE;
        const o = r * d;
        for (let j = 0; j < d; j++) {
          const x = v[j];
          const f = typeof x === "number" ? Math.fround(x) : Infinity;
          if (f === Infinity || f === -Infinity) {
            badItem = j;
            return ITEM;
          }
          a[o + j] = f;
        }
        return OK;
      };
    }
  }
}

function valueError(code: number, col: TableColumn, v: unknown, field: string): DensewireError {
  if (code === SHAPE) {
    return new DensewireError("shape_mismatch", `a ${col.type} value must hold ${col.dimensions} numbers, got ${(v as unknown[]).length}`, { field });
  }
  if (code === ITEM) {
    const x = (v as unknown[])[badItem];
    const why = typeof x === "number" ? `${describe(x)} is out of the range of float32` : `a vector item must be a number, got ${describe(x)}`;
    return new DensewireError("invalid_field", why, { field: `${field}[${badItem}]` });
  }
  let why = `not a ${col.type} value: ${describe(v)}`;
  if (col.type === "int64" && typeof v === "number" && Number.isInteger(v)) {
    why = `int64 value ${describe(v)} is beyond ±(2^53 − 1), which JSON numbers read as binary64 cannot carry exactly (use CSV or a binary format)`;
  } else if ((col.type === "int32" && typeof v === "number" && Number.isInteger(v)) || (typeof v === "number" && col.type.startsWith("float"))) {
    why = `${describe(v)} is out of the range of ${col.type}`;
  }
  return new DensewireError("invalid_field", why, { field });
}

/** Reads `columns` of the rows and columns layouts: name and type of each (`invalid_field`, `unknown_dtype`). */
function readSpecs(doc: Record<string, unknown>): { specs: ColumnSpec[]; raw: Record<string, unknown>[] } {
  const columns = doc["columns"];
  if (!Array.isArray(columns)) throw new DensewireError("invalid_field", columns === undefined ? "missing" : `must be an array, got ${describe(columns)}`, { field: "columns" });
  const seen = new Set<string>();
  const specs: ColumnSpec[] = [];
  columns.forEach((c: unknown, i) => {
    if (!isObject(c)) throw new DensewireError("invalid_field", `must be an object, got ${describe(c)}`, { field: `columns[${i}]` });
    const name = c["name"];
    if (typeof name !== "string" || name === "") {
      throw new DensewireError("invalid_field", `must be a non-empty string, got ${describe(name)}`, { field: `columns[${i}].name` });
    }
    if (seen.has(name)) throw new DensewireError("invalid_field", `column ${JSON.stringify(name)} appears twice`, { field: `columns[${i}].name` });
    seen.add(name);
    if (!("type" in c)) throw new DensewireError("invalid_field", "missing", { field: `columns[${i}].type` });
    specs.push({ name, type: parseColumnType(c["type"], `columns[${i}].type`) });
  });
  return { specs, raw: columns as Record<string, unknown>[] };
}

function readName(doc: Record<string, unknown>): string {
  const name = doc["name"];
  if (typeof name !== "string") throw new DensewireError("invalid_field", name === undefined ? "missing" : `must be a string, got ${describe(name)}`, { field: "name" });
  return name;
}

/**
 * Decodes JSON objects (`application/json`): an array of one object a row, with exactly the table's
 * keys. The schema comes from `options.columns` or the `Densewire-Columns` of `options.headers`.
 * Errors: `malformed` (not JSON, `NaN` tokens, not an array), `invalid_field` on `[ROW]` (not an
 * object) or `[ROW].KEY` (missing, unknown or invalid value), `shape_mismatch` on `[ROW].KEY` (a
 * vector of the wrong length).
 */
export function decodeTableJSON(input: string | Uint8Array | ArrayBuffer, options: TableDecodeOptions = {}): Table {
  const specs = schemaOf(options, "JSON objects");
  const doc = parse(input);
  if (!Array.isArray(doc)) throw new DensewireError("malformed", `JSON objects must be an array of rows, got ${describe(doc)}`);
  const n = doc.length;
  const columns = specs.map((s) => allocColumn(s.name, s.type, n));
  const setters = columns.map(setter);
  const names = specs.map((s) => s.name);
  const k = names.length;
  for (let r = 0; r < n; r++) {
    const o = doc[r];
    if (!isObject(o)) throw new DensewireError("invalid_field", `must be an object, got ${describe(o)}`, { field: `[${r}]` });
    let count = 0;
    for (const _ in o) count++;
    for (let c = 0; c < k; c++) {
      const v = o[names[c]!];
      const code = v === undefined ? BAD : setters[c]!(v, r);
      if (code !== OK) {
        if (!Object.hasOwn(o, names[c]!)) throw new DensewireError("invalid_field", "missing key", { field: `[${r}].${names[c]}` });
        throw valueError(code, columns[c]!, v, `[${r}].${names[c]}`);
      }
    }
    if (count !== k) {
      const extra = Object.keys(o).find((key) => !names.includes(key));
      throw new DensewireError("invalid_field", "unknown key (not a column of the table)", { field: `[${r}].${extra ?? ""}` });
    }
  }
  checkRowsHeader(options, n);
  return { name: nameOf(options), rows: n, columns };
}

/**
 * Decodes the rows layout (`application/vnd.densewire.rows+json`):
 * `{"name", "columns": [{"name", "type"}], "rows": [[...], ...]}`. Errors: `malformed`,
 * `invalid_field` on `name`, `columns[COL].name`, `rows`, `rows[ROW][COL]`; `unknown_dtype` on
 * `columns[COL].type`; `shape_mismatch` on `rows[ROW]` (a row of the wrong length) or
 * `rows[ROW][COL]` (a vector of the wrong length).
 */
export function decodeTableJSONRows(input: string | Uint8Array | ArrayBuffer): Table {
  const doc = parse(input);
  if (!isObject(doc)) throw new DensewireError("malformed", `the rows layout must be a JSON object, got ${describe(doc)}`);
  const name = readName(doc);
  const { specs } = readSpecs(doc);
  const rows = doc["rows"];
  if (!Array.isArray(rows)) throw new DensewireError("invalid_field", rows === undefined ? "missing" : `must be an array, got ${describe(rows)}`, { field: "rows" });
  const n = rows.length;
  const columns = specs.map((s) => allocColumn(s.name, s.type, n));
  const setters = columns.map(setter);
  const k = specs.length;
  for (let r = 0; r < n; r++) {
    const row = rows[r];
    if (!Array.isArray(row)) throw new DensewireError("invalid_field", `must be an array, got ${describe(row)}`, { field: `rows[${r}]` });
    if (row.length !== k) throw new DensewireError("shape_mismatch", `${row.length} values in a row of ${k} columns`, { field: `rows[${r}]` });
    for (let c = 0; c < k; c++) {
      const code = setters[c]!(row[c], r);
      if (code !== OK) throw valueError(code, columns[c]!, row[c], `rows[${r}][${c}]`);
    }
  }
  return { name, rows: n, columns };
}

/**
 * Decodes the columns layout (`application/vnd.densewire.columns+json`):
 * `{"name", "rows": n, "columns": [{"name", "type", "values": [...]}]}`. Errors: `malformed`,
 * `invalid_field` on `name`, `rows`, `columns[COL].values[ROW]`; `unknown_dtype` on
 * `columns[COL].type`; `shape_mismatch` on `columns[COL].values` (not `rows` values) or
 * `columns[COL].values[ROW]` (a vector of the wrong length).
 */
export function decodeTableJSONColumns(input: string | Uint8Array | ArrayBuffer): Table {
  const doc = parse(input);
  if (!isObject(doc)) throw new DensewireError("malformed", `the columns layout must be a JSON object, got ${describe(doc)}`);
  const name = readName(doc);
  const n = doc["rows"];
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    throw new DensewireError("invalid_field", n === undefined ? "missing" : `must be a non-negative integer, got ${describe(n)}`, { field: "rows" });
  }
  const { specs, raw } = readSpecs(doc);
  const columns = specs.map((s, c) => {
    const values = raw[c]!["values"];
    if (!Array.isArray(values)) {
      throw new DensewireError("invalid_field", values === undefined ? "missing" : `must be an array, got ${describe(values)}`, { field: `columns[${c}].values` });
    }
    if (values.length !== n) throw new DensewireError("shape_mismatch", `${values.length} values in a table of ${n} rows`, { field: `columns[${c}].values` });
    const col = allocColumn(s.name, s.type, n);
    const set = setter(col);
    for (let r = 0; r < n; r++) {
      const code = set(values[r], r);
      if (code !== OK) throw valueError(code, col, values[r], `columns[${c}].values[${r}]`);
    }
    return col;
  });
  return { name, rows: n, columns };
}

// ------------------------------------------------------------------------------ encoding

/** The shortest decimal that reads back to the same float32 (SPEC.md section 3.5). */
export function float32ToShortest(v: number): string {
  if (v === 0) return Object.is(v, -0) ? "-0.0" : "0.0";
  for (let p = 1; p < 9; p++) {
    const s = v.toPrecision(p);
    if (Math.fround(Number(s)) === v) return String(Number(s));
  }
  return String(Number(v.toPrecision(9)));
}

/** A float64 as its shortest round-trip decimal, keeping the sign of zero. */
export function float64ToShortest(v: number): string {
  if (v === 0) return Object.is(v, -0) ? "-0.0" : "0.0";
  return String(v);
}

/**
 * Formats row `r` of a column as a JSON value. Non-finite floats are `non_finite` on `COLUMN[ROW]`.
 */
export function jsonValueWriter(col: TableColumn): (r: number) => string {
  const nonFinite = (r: number) => new DensewireError("non_finite", "NaN and ±Infinity have no JSON form", { field: `${col.name}[${r}]` });
  switch (col.type) {
    case "bool":
      return (r) => (col.values[r] ? "true" : "false");
    case "int32":
      return (r) => String(col.values[r]);
    case "int64":
      return (r) => String(col.values[r]);
    case "float32":
      return (r) => {
        const v = col.values[r]!;
        if (!Number.isFinite(v)) throw nonFinite(r);
        return float32ToShortest(v);
      };
    case "float64":
      return (r) => {
        const v = col.values[r]!;
        if (!Number.isFinite(v)) throw nonFinite(r);
        return float64ToShortest(v);
      };
    case "string":
      return (r) => JSON.stringify(col.values[r]);
    case "uuid":
      return (r) => `"${uuidToString(col.values, r)}"`;
    default: {
      const d = col.dimensions;
      return (r) => {
        const parts: string[] = [];
        for (let j = 0; j < d; j++) {
          const v = col.values[r * d + j]!;
          if (!Number.isFinite(v)) throw nonFinite(r);
          parts.push(float32ToShortest(v));
        }
        return `[${parts.join(",")}]`;
      };
    }
  }
}

/** Encodes a table as JSON objects (`application/json`). Errors: `non_finite` on `COLUMN[ROW]`. */
export function encodeTableJSON(table: Table): string {
  const keys = table.columns.map((c) => JSON.stringify(c.name) + ":");
  const writers = table.columns.map(jsonValueWriter);
  const out: string[] = [];
  for (let r = 0; r < table.rows; r++) {
    let s = "{";
    for (let c = 0; c < writers.length; c++) s += (c ? "," : "") + keys[c] + writers[c]!(r);
    out.push(s + "}");
  }
  return `[${out.join(",")}]`;
}

function specsJSON(table: Table): string {
  return `[${table.columns.map((c) => `{"name":${JSON.stringify(c.name)},"type":"${c.type}"}`).join(",")}]`;
}

/** Encodes a table in the rows layout (`application/vnd.densewire.rows+json`). */
export function encodeTableJSONRows(table: Table): string {
  const writers = table.columns.map(jsonValueWriter);
  const out: string[] = [];
  for (let r = 0; r < table.rows; r++) out.push(`[${writers.map((w) => w(r)).join(",")}]`);
  return `{"name":${JSON.stringify(table.name)},"columns":${specsJSON(table)},"rows":[${out.join(",")}]}`;
}

/** Encodes a table in the columns layout (`application/vnd.densewire.columns+json`). */
export function encodeTableJSONColumns(table: Table): string {
  const cols = table.columns.map((c) => {
    const w = jsonValueWriter(c);
    const values: string[] = [];
    for (let r = 0; r < table.rows; r++) values.push(w(r));
    return `{"name":${JSON.stringify(c.name)},"type":"${c.type}","values":[${values.join(",")}]}`;
  });
  return `{"name":${JSON.stringify(table.name)},"rows":${table.rows},"columns":[${cols.join(",")}]}`;
}

