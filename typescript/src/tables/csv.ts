/**
 * CSV (SPEC.md section 15.4): `text/csv; charset=utf-8; header=present`, RFC 4180 with CRLF (LF and
 * CR accepted), a header line of the column names, non-finite floats as `NaN`, `Infinity`,
 * `-Infinity`, vectors in pgvector's text form `[v1,v2,…]`. CSV carries no types: the schema comes
 * from `Densewire-Columns` or the caller. Every result is a fresh array.
 *
 * Line numbers in errors count records (a quoted field may span physical lines), the header being
 * line 1.
 */
import { DensewireError } from "../errors.js";
import {
  type Table,
  type TableColumn,
  type TableDecodeOptions,
  allocColumn,
  bodyText,
  checkRowsHeader,
  nameOf,
  parseUuidInto,
  schemaOf,
  uuidToString,
} from "./model.js";
import { float32ToShortest, float64ToShortest } from "./json.js";

/** A record reader over RFC 4180 text. */
class Records {
  pos = 0;
  line = 0;
  constructor(readonly text: string) {}

  /** The fields of the next record, or null at the end of the text. */
  next(): string[] | null {
    const t = this.text;
    const len = t.length;
    if (this.pos >= len) return null;
    this.line++;
    const fields: string[] = [];
    let pos = this.pos;
    for (;;) {
      if (t.charCodeAt(pos) === 34) {
        let p = pos + 1;
        let value = "";
        for (;;) {
          const q = t.indexOf('"', p);
          if (q < 0) {
            throw new DensewireError("truncated", `a quoted field opened at character ${pos} is never closed`, { offset: len, field: `line ${this.line}` });
          }
          if (t.charCodeAt(q + 1) === 34) {
            value += t.slice(p, q + 1);
            p = q + 2;
          } else {
            value += t.slice(p, q);
            pos = q + 1;
            break;
          }
        }
        fields.push(value);
      } else {
        let p = pos;
        for (; p < len; p++) {
          const c = t.charCodeAt(p);
          if (c === 44 || c === 13 || c === 10) break;
          if (c === 34) throw new DensewireError("malformed", `a quote inside an unquoted field at character ${p}`, { offset: p, field: `line ${this.line}` });
        }
        fields.push(t.slice(pos, p));
        pos = p;
      }
      if (pos >= len) break;
      const c = t.charCodeAt(pos);
      if (c === 44) {
        pos++;
        if (pos >= len) {
          fields.push("");
          break;
        }
        continue;
      }
      if (c === 13) {
        pos += t.charCodeAt(pos + 1) === 10 ? 2 : 1;
        break;
      }
      if (c === 10) {
        pos++;
        break;
      }
      throw new DensewireError("malformed", `character ${pos} follows a closing quote (expected , or a line end)`, { offset: pos, field: `line ${this.line}` });
    }
    this.pos = pos;
    return fields;
  }
}

/**
 * A CSV float (shortest decimal, `NaN`, `Infinity`, `-Infinity`), or undefined; also undefined for
 * a decimal beyond float64 (only the words spell infinities, SPEC.md 15.4).
 */
export function parseCSVFloat(s: string): number | undefined {
  const n = s.length;
  if (n === 0) return undefined;
  const z = s.charCodeAt(n - 1);
  if (z === 121 /* y */) return s === "Infinity" ? Infinity : s === "-Infinity" ? -Infinity : undefined;
  const v = +s;
  if (v !== v) return s === "NaN" ? NaN : undefined;
  const a = s.charCodeAt(0);
  if (!((z >= 48 && z <= 57) || z === 46)) return undefined; // ends with a digit or "."
  if (!((a >= 48 && a <= 57) || a === 45 || a === 46 || a === 43)) return undefined; // no whitespace, no letters
  if (a === 48 && n > 1) {
    const b = s.charCodeAt(1) | 32;
    if (b === 120 || b === 98 || b === 111) return undefined; // 0x, 0b, 0o
  }
  return v === Infinity || v === -Infinity ? undefined : v;
}

/** A CSV float32: as parseCSVFloat, and undefined for a decimal beyond float32's range. */
function parseCSVFloat32(s: string): number | undefined {
  const v = parseCSVFloat(s);
  if (v === undefined) return undefined;
  const f = Math.fround(v);
  return (f === Infinity || f === -Infinity) && v !== f ? undefined : v; // v is infinite only when spelled so
}

const INT = /^-?[0-9]+$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A function parsing one field into row `r` of a column; false if it does not parse. */
function parser(col: TableColumn): (s: string, r: number) => boolean {
  switch (col.type) {
    case "bool": {
      const a = col.values;
      return (s, r) => {
        if (s === "true") a[r] = 1;
        else if (s !== "false") return false;
        return true;
      };
    }
    case "int32": {
      const a = col.values;
      return (s, r) => {
        if (!INT.test(s)) return false;
        const v = Number(s);
        if (v < -2147483648 || v > 2147483647) return false;
        a[r] = v;
        return true;
      };
    }
    case "int64": {
      const a = col.values;
      return (s, r) => {
        if (!INT.test(s)) return false;
        const v = BigInt(s);
        if (v < INT64_MIN || v > INT64_MAX) return false;
        a[r] = v;
        return true;
      };
    }
    case "float32": {
      const a = col.values;
      return (s, r) => {
        const v = parseCSVFloat32(s);
        if (v === undefined) return false;
        a[r] = v;
        return true;
      };
    }
    case "float64": {
      const a = col.values;
      return (s, r) => {
        const v = parseCSVFloat(s);
        if (v === undefined) return false;
        a[r] = v;
        return true;
      };
    }
    case "string": {
      const a = col.values;
      return (s, r) => {
        a[r] = s;
        return true;
      };
    }
    case "uuid": {
      const a = col.values;
      return (s, r) => parseUuidInto(s, a, r * 16);
    }
    default: {
      const a = col.values;
      const d = col.dimensions;
      return (s, r) => {
        if (s.charCodeAt(0) !== 91 || s.charCodeAt(s.length - 1) !== 93) return false;
        const items = s.slice(1, -1).split(",");
        if (items.length !== d) return false;
        for (let j = 0; j < d; j++) {
          const v = parseCSVFloat32(items[j]!);
          if (v === undefined) return false;
          a[r * d + j] = v;
        }
        return true;
      };
    }
  }
}

/**
 * Decodes CSV with the schema from `options.columns` or the `Densewire-Columns` of `options.headers`.
 * Errors: `shape_mismatch` on `header` (the header line does not name the columns in order) or on
 * `line L` (another number of fields); `invalid_field` on `line L, COLUMN` (a field that does not parse
 * as its type); `truncated` (an unterminated quoted field); `malformed` (invalid UTF-8, a stray quote).
 */
export function decodeTableCSV(input: string | Uint8Array | ArrayBuffer, options: TableDecodeOptions = {}): Table {
  const specs = schemaOf(options, "CSV");
  const text = bodyText(input, "CSV");
  const records = new Records(text);
  const header = records.next() ?? [];
  const k = specs.length;
  if (header.length !== k || header.some((h, i) => h !== specs[i]!.name)) {
    throw new DensewireError("shape_mismatch", `the header line ${JSON.stringify(header.join(","))} does not name the columns ${specs.map((s) => s.name).join(",")} in order`, {
      field: "header",
    });
  }
  const lines: string[][] = [];
  for (let f = records.next(); f !== null; f = records.next()) {
    if (f.length !== k) throw new DensewireError("shape_mismatch", `${f.length} fields in a table of ${k} columns`, { field: `line ${records.line}` });
    lines.push(f);
  }
  const n = lines.length;
  const columns = specs.map((s) => allocColumn(s.name, s.type, n));
  for (let c = 0; c < k; c++) {
    const parse = parser(columns[c]!);
    for (let r = 0; r < n; r++) {
      const s = lines[r]![c]!;
      if (!parse(s, r)) {
        throw new DensewireError("invalid_field", `${JSON.stringify(s.length > 60 ? s.slice(0, 60) + "..." : s)} is not a ${specs[c]!.type} value`, {
          field: `line ${r + 2}, ${specs[c]!.name}`,
        });
      }
    }
  }
  checkRowsHeader(options, n);
  return { name: nameOf(options), rows: n, columns };
}

// ------------------------------------------------------------------------------ encoding

const NEEDS_QUOTES = /[",\r\n]|^[ \uFEFF]| $|^$/;

/** A CSV field, quoted when it contains `,`, `"`, CR or LF, is empty, or starts or ends with a space. */
export function csvField(s: string): string {
  return NEEDS_QUOTES.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

function csvFloat(v: number, f32: boolean): string {
  if (v !== v) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  return f32 ? float32ToShortest(v) : float64ToShortest(v);
}

function csvWriter(col: TableColumn): (r: number) => string {
  switch (col.type) {
    case "bool":
      return (r) => (col.values[r] ? "true" : "false");
    case "int32":
    case "int64":
      return (r) => String(col.values[r]);
    case "float32":
      return (r) => csvFloat(col.values[r]!, true);
    case "float64":
      return (r) => csvFloat(col.values[r]!, false);
    case "string":
      return (r) => csvField(col.values[r]!);
    case "uuid":
      return (r) => uuidToString(col.values, r);
    default: {
      const d = col.dimensions;
      return (r) => {
        const parts: string[] = [];
        for (let j = 0; j < d; j++) parts.push(csvFloat(col.values[r * d + j]!, true));
        return `"[${parts.join(",")}]"`;
      };
    }
  }
}

/** Encodes a table as CSV (SPEC.md section 15.4): header line, CRLF after every line. */
export function encodeTableCSV(table: Table): string {
  const writers = table.columns.map(csvWriter);
  const out: string[] = [table.columns.map((c) => csvField(c.name)).join(",") + "\r\n"];
  for (let r = 0; r < table.rows; r++) out.push(writers.map((w) => w(r)).join(",") + "\r\n");
  return out.join("");
}
