/** Helpers of the tables tests: the golden file, tables built from golden cases, bit-exact comparison. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ColumnType, type Table, type TableColumn, makeTable, parseUuid, vectorDimensions } from "../src/index.js";
import { type GoldenCase, repoRoot, toHex } from "./helpers.js";

export interface GoldenColumn {
  name: string;
  type: ColumnType;
  values: unknown[];
}

export function loadTablesGolden(): GoldenCase[] {
  const doc = JSON.parse(readFileSync(join(repoRoot(), "testdata", "golden", "tables.json"), "utf8")) as { cases: GoldenCase[] };
  return doc.cases;
}

function f32(hex: string): number {
  return new Float32Array(new Uint32Array([parseInt(hex, 16)]).buffer)[0]!;
}

/** A column from its golden form (bool as true/false, integers as decimal strings, floats as hex bits). */
export function columnOfGolden(g: GoldenColumn): TableColumn {
  const v = g.values;
  switch (g.type) {
    case "bool":
      return { name: g.name, type: "bool", values: Uint8Array.from(v as boolean[], (b) => (b ? 1 : 0)) };
    case "int32":
      return { name: g.name, type: "int32", values: Int32Array.from(v as string[], (s) => Number(s)) };
    case "int64":
      return { name: g.name, type: "int64", values: BigInt64Array.from(v as string[], (s) => BigInt(s)) };
    case "float32":
      return { name: g.name, type: "float32", values: new Float32Array(Uint32Array.from(v as string[], (h) => parseInt(h, 16)).buffer) };
    case "float64":
      return { name: g.name, type: "float64", values: new Float64Array(BigUint64Array.from(v as string[], (h) => BigInt("0x" + h)).buffer) };
    case "string":
      return { name: g.name, type: "string", values: [...(v as string[])] };
    case "uuid": {
      const out = new Uint8Array(16 * v.length);
      (v as string[]).forEach((s, i) => out.set(parseUuid(s), 16 * i));
      return { name: g.name, type: "uuid", values: out };
    }
    default: {
      const d = vectorDimensions(g.type);
      assert.ok(d > 0, `unknown golden column type ${g.type}`);
      const flat = (v as string[][]).flat();
      const values = new Float32Array(Uint32Array.from(flat, (h) => parseInt(h, 16)).buffer);
      assert.equal(values.length, d * v.length);
      void f32;
      return { name: g.name, type: g.type, values, dimensions: d };
    }
  }
}

/** The table of a golden case. */
export function tableOfCase(c: GoldenCase): Table {
  const t = makeTable(c["table"] as string, (c["columns"] as GoldenColumn[]).map(columnOfGolden));
  assert.equal(t.rows, c["rows"], "rows of the golden case itself");
  return t;
}

/** A column's values as comparable data: hex of the bytes for fixed-width types (bits, not values), the list for strings. */
export function columnData(c: TableColumn): string | string[] {
  if (c.type === "string") return c.values;
  const v = c.values;
  return toHex(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
}

/** Asserts two tables are equal: name, rows, column names, types, dimensions and value bits. */
export function assertTableEqual(actual: Table, expected: Table, what = "table"): void {
  assert.equal(actual.name, expected.name, `${what}: name`);
  assert.equal(actual.rows, expected.rows, `${what}: rows`);
  assert.deepEqual(
    actual.columns.map((c) => [c.name, c.type, c.dimensions]),
    expected.columns.map((c) => [c.name, c.type, c.dimensions]),
    `${what}: columns`,
  );
  actual.columns.forEach((c, i) => {
    const e = expected.columns[i]!;
    assert.equal(c.values.constructor, e.values.constructor, `${what}: ${c.name} array type`);
    assert.deepEqual(columnData(c), columnData(e), `${what}: ${c.name} values (bits)`);
  });
}
