/**
 * Tables (SPEC.md section 15): decoders and encoders of the seven formats, by format name.
 */
import { DensewireError } from "../errors.js";
import { decodeTableArrow, encodeTableArrow } from "./arrow.js";
import { decodeTableCSV, encodeTableCSV } from "./csv.js";
import { decodeTableJSON, decodeTableJSONColumns, decodeTableJSONRows, encodeTableJSON, encodeTableJSONColumns, encodeTableJSONRows } from "./json.js";
import type { Table, TableDecodeOptions, TableFormat } from "./model.js";
import { decodeTableMsgpack, encodeTableMsgpack } from "./msgpack.js";
import { type TableProtobufOptions, decodeTableProtobuf, encodeTableProtobuf } from "./protobuf.js";

/**
 * Decodes a table body of any format but Arrow, synchronously. `options` gives JSON objects and CSV
 * their schema (`columns`, or `headers` holding `Densewire-Columns`) and name.
 */
export function decodeTableSync(body: string | Uint8Array | ArrayBuffer, format: Exclude<TableFormat, "arrow">, options: TableDecodeOptions = {}): Table {
  const binary = () => {
    if (typeof body === "string") throw new TypeError(`a ${format} body must be bytes (Uint8Array or ArrayBuffer), not a string`);
    return body;
  };
  switch (format) {
    case "json":
      return decodeTableJSON(body, options);
    case "json-rows":
      return decodeTableJSONRows(body);
    case "json-columns":
      return decodeTableJSONColumns(body);
    case "csv":
      return decodeTableCSV(body, options);
    case "msgpack":
      return decodeTableMsgpack(binary());
    case "protobuf":
      return decodeTableProtobuf(binary());
    default:
      if ((format as string) === "arrow") throw new TypeError("Arrow decoding is async: use decodeTable or decodeTableArrow");
      throw new DensewireError("invalid_field", `unknown table format ${JSON.stringify(format)}`, { field: "format" });
  }
}

/** Decodes a table body of any of the seven formats (async because Arrow loads apache-arrow on first use). */
export async function decodeTable(body: string | Uint8Array | ArrayBuffer, format: TableFormat, options: TableDecodeOptions = {}): Promise<Table> {
  if (format === "arrow") {
    if (typeof body === "string") throw new TypeError("an arrow body must be bytes (Uint8Array or ArrayBuffer), not a string");
    return decodeTableArrow(body, options);
  }
  return decodeTableSync(body, format, options);
}

/** Encodes a table in any format but Arrow: a string for the JSON layouts and CSV, bytes otherwise. */
export function encodeTableSync(table: Table, format: Exclude<TableFormat, "arrow">, options: TableProtobufOptions = {}): string | Uint8Array {
  switch (format) {
    case "json":
      return encodeTableJSON(table);
    case "json-rows":
      return encodeTableJSONRows(table);
    case "json-columns":
      return encodeTableJSONColumns(table);
    case "csv":
      return encodeTableCSV(table);
    case "msgpack":
      return encodeTableMsgpack(table);
    case "protobuf":
      return encodeTableProtobuf(table, options);
    default:
      if ((format as string) === "arrow") throw new TypeError("Arrow encoding is async: use encodeTable or encodeTableArrow");
      throw new DensewireError("invalid_field", `unknown table format ${JSON.stringify(format)}`, { field: "format" });
  }
}

/** Encodes a table in any of the seven formats (async because of Arrow). */
export async function encodeTable(table: Table, format: TableFormat, options: TableProtobufOptions = {}): Promise<string | Uint8Array> {
  return format === "arrow" ? encodeTableArrow(table) : encodeTableSync(table, format, options);
}
