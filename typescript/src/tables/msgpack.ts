/**
 * Columnar MessagePack (SPEC.md section 15.5), on @msgpack/msgpack: one map
 * `{"name": str, "rows": n, "columns": [{"name", "type", "data"}]}`, `data` a bin of `n × width`
 * little-endian bytes for fixed-width types, an array of `n` str for `string`.
 *
 * Decoding: @msgpack/msgpack returns each bin as a subarray of the body, so a fixed-width column is a
 * **view** over the body when its bin payload is aligned for the type (always for bool and uuid; for
 * the others it depends on where the map's header bytes leave the payload), one copy otherwise.
 * Encoding writes the smallest representation of each value, so the body is byte-exact.
 */
import { Encoder } from "@msgpack/msgpack";
import { describe } from "../dtypes.js";
import { DensewireError } from "../errors.js";
import { decodeMsgpackMap, isPlainObject as isMap } from "../msgpack.js";
import {
  type Table,
  type TableColumn,
  checkBoolBytes,
  checkDataLength,
  columnBytes,
  columnOfBytes,
  parseColumnType,
  typeWidth,
} from "./model.js";

function missingOr(v: unknown, what: string): string {
  return v === undefined ? "missing" : `must be ${what}, got ${describe(v)}`;
}

/**
 * Decodes a columnar MessagePack table. Errors: `malformed` (not a map, a key not a str, trailing bytes)
 * and `truncated` with offsets; `invalid_field` on `name`, `rows`, `columns`, `columns[COL].name`,
 * `.type`, `.data`, `columns[COL].data[ROW]` (a bool byte other than 0 or 1); `unknown_dtype` on
 * `columns[COL].type`; `length_mismatch` on `columns[COL].data` at `min(actual, expected)`;
 * `shape_mismatch` on `columns[COL].data` (a string array of the wrong length).
 */
export function decodeTableMsgpack(body: Uint8Array | ArrayBuffer): Table {
  const doc = decodeMsgpackMap(body instanceof Uint8Array ? body : new Uint8Array(body));
  const name = doc["name"];
  if (typeof name !== "string") throw new DensewireError("invalid_field", missingOr(name, "a str"), { field: "name" });
  const n = doc["rows"];
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    throw new DensewireError("invalid_field", missingOr(n, "a non-negative integer"), { field: "rows" });
  }
  const list = doc["columns"];
  if (!Array.isArray(list)) throw new DensewireError("invalid_field", missingOr(list, "an array"), { field: "columns" });
  const seen = new Set<string>();
  const columns = list.map((c: unknown, i): TableColumn => {
    const at = `columns[${i}]`;
    if (!isMap(c)) throw new DensewireError("invalid_field", `must be a map, got ${describe(c)}`, { field: at });
    const cname = c["name"];
    if (typeof cname !== "string" || cname === "") throw new DensewireError("invalid_field", missingOr(cname, "a non-empty str"), { field: `${at}.name` });
    if (seen.has(cname)) throw new DensewireError("invalid_field", `column ${JSON.stringify(cname)} appears twice`, { field: `${at}.name` });
    seen.add(cname);
    if (c["type"] === undefined) throw new DensewireError("invalid_field", "missing", { field: `${at}.type` });
    const type = parseColumnType(c["type"], `${at}.type`);
    const data = c["data"];
    if (type === "string") {
      if (!Array.isArray(data)) throw new DensewireError("invalid_field", missingOr(data, "an array of str"), { field: `${at}.data` });
      if (data.length !== n) throw new DensewireError("shape_mismatch", `${data.length} strings in a table of ${n} rows`, { field: `${at}.data` });
      for (let r = 0; r < n; r++) {
        if (typeof data[r] !== "string") throw new DensewireError("invalid_field", `must be a str, got ${describe(data[r])}`, { field: `${at}.data[${r}]` });
      }
      return { name: cname, type, values: data as string[] };
    }
    if (!(data instanceof Uint8Array)) throw new DensewireError("invalid_field", missingOr(data, "a bin"), { field: `${at}.data` });
    checkDataLength(data.length, n * typeWidth(type), `${at}.data`);
    if (type === "bool") checkBoolBytes(data, `${at}.data`);
    return columnOfBytes(cname, type, data);
  });
  return { name, rows: n, columns };
}

/** Encodes a table as columnar MessagePack (SPEC.md section 15.5), byte-exact. */
export function encodeTableMsgpack(table: Table): Uint8Array {
  let size = 64 + table.name.length * 3;
  const columns = table.columns.map((c) => {
    const data = c.type === "string" ? c.values : columnBytes(c);
    size += 32 + c.name.length * 3 + (c.type === "string" ? c.values.reduce((s, v) => s + 5 + v.length * 3, 0) : (data as Uint8Array).length);
    return { name: c.name, type: c.type, data };
  });
  const encoder = new Encoder({ initialBufferSize: size });
  return encoder.encodeSharedRef({ name: table.name, rows: table.rows, columns });
}
