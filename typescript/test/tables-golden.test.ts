/**
 * The tables golden vectors (SPEC.md sections 13 and 15): every case of testdata/golden/tables.json,
 * one test per case id, floats compared by their bits. Valid cases decode to their table (JSON objects
 * and CSV with the schema of their Densewire-Columns header) and re-encode: byte-exact for MessagePack
 * and Protobuf, decoding back to the same table for the rest. Invalid cases fail with their category,
 * field and offset. Cases of features TypeScript does not claim (capabilities.json) are listed, not run.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ColumnSpec,
  type TableFormat,
  decodeTable,
  encodeTable,
  encodeTableJSON,
  encodeTableProtobuf,
  tableHeaders,
} from "../src/index.js";
import { type GoldenCase, assertDensewireErrorAsync, assertDensewireError, fromHex, toHex } from "./helpers.js";
import { assertTableEqual, loadTablesGolden, tableOfCase } from "./tables-helpers.js";
import { claimedCases } from "./capabilities.js";

const FORMATS = new Set(["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"]);

function bodyOf(c: GoldenCase): string | Uint8Array {
  if ("encoded_hex" in c) return fromHex(c["encoded_hex"] as string);
  if ("input_hex" in c) return fromHex(c["input_hex"] as string);
  return (c["encoded_text"] ?? c["input_text"]) as string;
}

async function checkValid(c: GoldenCase): Promise<void> {
  const format = c["format"] as TableFormat;
  assert.ok(FORMATS.has(format), `format ${format} is not supported by this library`);
  const expected = tableOfCase(c);
  const headers = c["headers"] as Record<string, string>;
  // the case's headers are those a server sends (SPEC.md section 15.2)
  const ours = tableHeaders(expected);
  assert.equal(ours["Densewire-Columns"], headers["Densewire-Columns"], "Densewire-Columns");
  assert.equal(ours["Densewire-Rows"], headers["Densewire-Rows"], "Densewire-Rows");
  assert.equal(ours["Densewire-Table"], headers["Densewire-Table"], "Densewire-Table");

  const decoded = await decodeTable(bodyOf(c), format, { headers });
  assertTableEqual(decoded, expected, "decoded");

  const split = c["column_encoding"] === "byte_stream_split";
  const encoded = format === "protobuf" ? encodeTableProtobuf(expected, { byteStreamSplit: split }) : await encodeTable(expected, format);
  if (c["byte_exact"] === true) {
    assert.ok(encoded instanceof Uint8Array);
    assert.equal(toHex(encoded), c["encoded_hex"], "encoded_hex");
  }
  assertTableEqual(await decodeTable(encoded, format, { headers }), expected, "re-encoded");
}

async function checkInvalid(c: GoldenCase): Promise<void> {
  const expected = { category: c["error"] as string, offset: c["offset"] as number | undefined, field: c["field"] as string | undefined };
  if (c["direction"] === "encode") {
    assert.equal(c["format"], "json", "encode-direction cases are JSON");
    const table = tableOfCase(c);
    assertDensewireError(() => encodeTableJSON(table), expected);
    return;
  }
  const format = c["format"] as TableFormat;
  assert.ok(FORMATS.has(format), `format ${format} is not supported by this library`);
  const columns = c["columns"] as ColumnSpec[] | undefined;
  await assertDensewireErrorAsync(() => decodeTable(bodyOf(c), format, columns !== undefined ? { columns } : {}), expected);
}

describe("tables golden vectors", () => {
  const cases = loadTablesGolden();
  it("has every case of the spec", () => assert.ok(cases.length >= 80, `only ${cases.length} cases`));
  for (const c of claimedCases({ "tables.json": cases })) it(c.id, () => (c.id.startsWith("invalid.") ? checkInvalid(c) : checkValid(c)));
});
