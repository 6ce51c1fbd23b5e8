/** Unit tests of the table codecs, format by format, beyond the golden vectors. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type Table,
  decodeTable,
  decodeTableArrow,
  decodeTableCSV,
  decodeTableJSON,
  decodeTableJSONColumns,
  decodeTableJSONRows,
  decodeTableMsgpack,
  decodeTableProtobuf,
  encodeTableArrow,
  encodeTableCSV,
  encodeTableJSON,
  encodeTableJSONColumns,
  encodeTableJSONRows,
  encodeTableMsgpack,
  encodeTableProtobuf,
  makeTable,
  pb,
  parseUuid,
} from "../src/index.js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Encoder } from "@msgpack/msgpack";
import { assertDensewireError, assertDensewireErrorAsync } from "./helpers.js";
import { assertTableEqual } from "./tables-helpers.js";

/** A small table of every type, with values at the edges. */
function everyType(n = 5): Table {
  const ids = new Uint8Array(16 * n);
  for (let i = 0; i < ids.length; i++) ids[i] = (i * 37) & 0xff;
  return makeTable("every type", [
    { name: "flag", type: "bool", values: Uint8Array.from({ length: n }, (_, i) => i & 1) },
    { name: "i32", type: "int32", values: Int32Array.from({ length: n }, (_, i) => (i % 2 ? -2147483648 : 2147483647) - i) },
    { name: "i64", type: "int64", values: BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 2 ? -9007199254740991 : 9007199254740991) - BigInt(i % 2 ? -i : i)) },
    { name: "f32", type: "float32", values: Float32Array.from({ length: n }, (_, i) => [0.1, -0, 1e-45, 3.4028234663852886e38, -2.5][i % 5]!) },
    { name: "f64", type: "float64", values: Float64Array.from({ length: n }, (_, i) => [0.1, -0, 5e-324, 1.7976931348623157e308, -73.97816027629273][i % 5]!) },
    { name: "text", type: "string", values: Array.from({ length: n }, (_, i) => ["plain", 'comma, "quote"\nnewline', "", " ünïcødé ✓ ", "[1,2]"][i % 5]!) },
    { name: "id", type: "uuid", values: ids },
    { name: "v", type: "float32[3]", values: Float32Array.from({ length: 3 * n }, (_, i) => (i % 4 === 3 ? -0 : i / 7)), dimensions: 3 },
  ]);
}

const schema = (t: Table) => t.columns.map((c) => ({ name: c.name, type: c.type }));

describe("tables: round trips of every format", () => {
  const t = everyType();
  it("JSON objects, rows, columns", () => {
    assertTableEqual(decodeTableJSON(encodeTableJSON(t), { columns: schema(t), name: t.name }), t);
    assertTableEqual(decodeTableJSONRows(encodeTableJSONRows(t)), t);
    assertTableEqual(decodeTableJSONColumns(encodeTableJSONColumns(t)), t);
    assertTableEqual(decodeTableJSONColumns(new TextEncoder().encode(encodeTableJSONColumns(t))), t, "from bytes");
  });
  it("CSV (quoting, -0.0, vectors)", () => {
    const csv = encodeTableCSV(t);
    assert.ok(csv.startsWith("flag,i32,i64,f32,f64,text,id,v\r\n"));
    assert.ok(csv.includes('"comma, ""quote""\nnewline"'));
    assert.ok(csv.includes('," ünïcødé ✓ ",'));
    assertTableEqual(decodeTableCSV(csv, { columns: schema(t), name: t.name }), t);
    assertTableEqual(decodeTableCSV(csv.replaceAll("\r\n", "\n"), { columns: schema(t), name: t.name }), t, "LF line ends");
  });
  it("MessagePack, Protobuf (plain and byte-stream-split), Arrow", async () => {
    assertTableEqual(decodeTableMsgpack(encodeTableMsgpack(t)), t);
    assertTableEqual(decodeTableProtobuf(encodeTableProtobuf(t)), t);
    assertTableEqual(decodeTableProtobuf(encodeTableProtobuf(t, { byteStreamSplit: false })), t);
    assertTableEqual(await decodeTableArrow(await encodeTableArrow(t)), t);
  });
  it("an empty table in every format", async () => {
    const e = everyType(0);
    for (const f of ["json-rows", "json-columns", "msgpack", "protobuf", "arrow"] as const) {
      const body = f === "arrow" ? await encodeTableArrow(e) : f === "msgpack" ? encodeTableMsgpack(e) : f === "protobuf" ? encodeTableProtobuf(e) : f === "json-rows" ? encodeTableJSONRows(e) : encodeTableJSONColumns(e);
      assertTableEqual(await decodeTable(body, f), e, f);
    }
    assertTableEqual(decodeTableCSV(encodeTableCSV(e), { columns: schema(e), name: e.name }), e, "csv");
    assertTableEqual(decodeTableJSON("[]", { columns: schema(e), name: e.name }), e, "json");
  });
});

describe("tables: JSON", () => {
  const columns = [{ name: "n", type: "int64" as const }];
  it("refuses int64 beyond ±(2^53 − 1) instead of rounding", () => {
    assert.equal(decodeTableJSON('[{"n":9007199254740991},{"n":-9007199254740991}]', { columns }).columns[0]!.values[1], -9007199254740991n);
    const e = assertDensewireError(() => decodeTableJSON('[{"n":1},{"n":9007199254740993}]', { columns }), { category: "invalid_field", field: "[1].n" });
    assert.match(e.message, /2\^53/);
    assertDensewireError(() => decodeTableJSONRows('{"name":"t","columns":[{"name":"n","type":"int64"}],"rows":[[-9007199254740992]]}'), {
      category: "invalid_field",
      field: "rows[0][0]",
    });
  });
  it("takes the schema from the headers, and needs one", () => {
    const t = decodeTableJSON('[{"a":true}]', { headers: { "densewire-columns": "a=bool", "Densewire-Table": "x", "Densewire-Rows": "1" } });
    assert.equal(t.name, "x");
    assert.deepEqual(Array.from(t.columns[0]!.values as Uint8Array), [1]);
    assertDensewireError(() => decodeTableJSON("[]"), { category: "invalid_field", field: "Densewire-Columns" });
    assertDensewireError(() => decodeTableJSON('[{"a":true}]', { headers: { "Densewire-Columns": "a=bool", "Densewire-Rows": "2" } }), {
      category: "shape_mismatch",
      field: "Densewire-Rows",
    });
  });
  it("names the row and key of every bad value", () => {
    const cols = [
      { name: "a", type: "int32" as const },
      { name: "toString", type: "bool" as const },
    ];
    assertDensewireError(() => decodeTableJSON('[{"a":1,"toString":true},{"a":2}]', { columns: cols }), { category: "invalid_field", field: "[1].toString" });
    assertDensewireError(() => decodeTableJSON('[{"a":1,"toString":true,"c":3}]', { columns: cols }), { category: "invalid_field", field: "[0].c" });
    assertDensewireError(() => decodeTableJSON('[{"a":1.5,"toString":true}]', { columns: cols }), { category: "invalid_field", field: "[0].a" });
    assertDensewireError(() => decodeTableJSON('[{"a":2147483648,"toString":true}]', { columns: cols }), { category: "invalid_field", field: "[0].a" });
    assertDensewireError(() => decodeTableJSON('[1]', { columns: cols }), { category: "invalid_field", field: "[0]" });
    assertDensewireError(() => decodeTableJSON('{"a":1}', { columns: cols }), { category: "malformed" });
    assertDensewireError(() => decodeTableJSON(new Uint8Array([0x5b, 0xff, 0x5d]), { columns: cols }), { category: "malformed" });
    assertDensewireError(() => decodeTableJSON('[{"v":1e39}]', { columns: [{ name: "v", type: "float32" }] }), { category: "invalid_field", field: "[0].v" });
    assertDensewireError(() => decodeTableJSON('[{"v":[1,2]}]', { columns: [{ name: "v", type: "float32[3]" }] }), { category: "shape_mismatch", field: "[0].v" });
  });
  it("checks the rows and columns layouts' structure", () => {
    assertDensewireError(() => decodeTableJSONRows('{"columns":[],"rows":[]}'), { category: "invalid_field", field: "name" });
    assertDensewireError(() => decodeTableJSONRows('{"name":"t","columns":[{"name":"a"}],"rows":[]}'), { category: "invalid_field", field: "columns[0].type" });
    assertDensewireError(() => decodeTableJSONRows('{"name":"t","columns":[{"name":"a","type":"bool"},{"name":"a","type":"bool"}],"rows":[]}'), {
      category: "invalid_field",
      field: "columns[1].name",
    });
    assertDensewireError(() => decodeTableJSONColumns('{"name":"t","rows":-1,"columns":[]}'), { category: "invalid_field", field: "rows" });
    assertDensewireError(() => decodeTableJSONColumns('{"name":"t","rows":1,"columns":[{"name":"a","type":"bool"}]}'), { category: "invalid_field", field: "columns[0].values" });
    const t = decodeTableJSONColumns('{"name":"t","rows":1,"extra":{},"columns":[{"name":"a","type":"uuid","values":["123E4567-E89B-12D3-A456-426614174000"]}]}');
    assert.deepEqual(t.columns[0]!.values, parseUuid("123e4567-e89b-12d3-a456-426614174000"));
  });
  it("refuses to write NaN and ±Infinity (non_finite on COLUMN[ROW]), in vectors too", () => {
    const t = makeTable("t", [{ name: "v", type: "float32[2]", values: new Float32Array([1, 2, 3, Infinity]), dimensions: 2 }]);
    assertDensewireError(() => encodeTableJSONRows(t), { category: "non_finite", field: "v[1]" });
    assertDensewireError(() => encodeTableJSONColumns(t), { category: "non_finite", field: "v[1]" });
  });
  it("writes float32 values with float32-shortest digits", () => {
    const t = makeTable("t", [{ name: "x", type: "float32", values: new Float32Array([0.1, 3.4028234663852886e38, 1e-45, -0]) }]);
    assert.equal(encodeTableJSON(t), '[{"x":0.1},{"x":3.4028235e+38},{"x":1e-45},{"x":-0.0}]');
  });
});

describe("tables: CSV", () => {
  const columns = [
    { name: "a", type: "int32" as const },
    { name: "s", type: "string" as const },
  ];
  it("reads quoted fields with commas, quotes and line breaks, and counts records as lines", () => {
    const t = decodeTableCSV('a,s\r\n1,"x, ""y""\r\nz"\r\n2,\r\n', { columns });
    assert.deepEqual(t.columns[1]!.values, ['x, "y"\r\nz', ""]);
    assertDensewireError(() => decodeTableCSV('a,s\r\n1,"x\r\ny"\r\n2,b,c\r\n', { columns }), { category: "shape_mismatch", field: "line 3" });
    assertDensewireError(() => decodeTableCSV("a,s\r\n1,x\r\nz,y\r\n", { columns }), { category: "invalid_field", field: "line 3, a" });
  });
  it("refuses decimals beyond float32 in float32 columns and vectors; only the words spell infinities", () => {
    const f32 = [{ name: "x", type: "float32" as const }];
    assertDensewireError(() => decodeTableCSV("x\r\nInfinity\r\n-1e39\r\n", { columns: f32 }), { category: "invalid_field", field: "line 3, x" });
    const ok = decodeTableCSV("x\r\n3.4028235e38\r\n-Infinity\r\n", { columns: f32 }).columns[0]!.values as Float32Array;
    assert.deepEqual([...ok], [3.4028234663852886e38, -Infinity]);
    const v = [{ name: "v", type: "float32[2]" as const }];
    assertDensewireError(() => decodeTableCSV('v\r\n"[1,4e38]"\r\n', { columns: v }), { category: "invalid_field", field: "line 2, v" });
    assert.deepEqual([...(decodeTableCSV('v\r\n"[1,Infinity]"\r\n', { columns: v }).columns[0]!.values as Float32Array)], [1, Infinity]);
  });
  it("is strict about numbers", () => {
    const f = [{ name: "x", type: "float64" as const }];
    for (const bad of ["", " 1", "1 ", "0x10", "1e", "inf", "nan", "+Infinity", "1_0", "--1", "1e400", "-1e309"]) {
      assertDensewireError(() => decodeTableCSV(`x\r\n${bad === "" ? '""' : bad}\r\n`, { columns: f }), { category: "invalid_field", field: "line 2, x" });
    }
    const ok = decodeTableCSV("x\r\n1e3\r\n-0.0\r\n.5\r\n-Infinity\r\nNaN\r\n", { columns: f }).columns[0]!.values as Float64Array;
    assert.deepEqual(Array.from(ok), [1000, -0, 0.5, -Infinity, NaN]);
    const big = decodeTableCSV("n\r\n9223372036854775807\r\n-9223372036854775808\r\n", { columns: [{ name: "n", type: "int64" }] });
    assert.deepEqual(Array.from(big.columns[0]!.values as BigInt64Array), [9223372036854775807n, -9223372036854775808n]);
    assertDensewireError(() => decodeTableCSV("n\r\n9223372036854775808\r\n", { columns: [{ name: "n", type: "int64" }] }), { category: "invalid_field", field: "line 2, n" });
  });
  it("rejects stray quotes and bad headers", () => {
    assertDensewireError(() => decodeTableCSV('a,s\r\n1,x"y\r\n', { columns }), { category: "malformed", field: "line 2" });
    assertDensewireError(() => decodeTableCSV("s,a\r\n", { columns }), { category: "shape_mismatch", field: "header" });
    assertDensewireError(() => decodeTableCSV("", { columns }), { category: "shape_mismatch", field: "header" });
  });
});

describe("tables: MessagePack", () => {
  const enc = (doc: unknown) => new Encoder().encode(doc);
  it("accepts keys in any order and ignores unknown keys", () => {
    const t = decodeTableMsgpack(enc({ extra: 1, columns: [{ data: new Uint8Array([1, 0]), x: 2, type: "bool", name: "b" }], rows: 2, name: "t" }));
    assert.deepEqual(Array.from(t.columns[0]!.values as Uint8Array), [1, 0]);
  });
  it("names the offending key", () => {
    assertDensewireError(() => decodeTableMsgpack(enc({ name: "t", rows: 1 })), { category: "invalid_field", field: "columns" });
    assertDensewireError(() => decodeTableMsgpack(enc({ rows: 1, columns: [] })), { category: "invalid_field", field: "name" });
    assertDensewireError(() => decodeTableMsgpack(enc({ name: "t", rows: 1, columns: [{ name: "a", type: "int32", data: [1] }] })), { category: "invalid_field", field: "columns[0].data" });
    assertDensewireError(() => decodeTableMsgpack(enc({ name: "t", rows: 1, columns: [{ name: "a", data: new Uint8Array(4) }] })), { category: "invalid_field", field: "columns[0].type" });
    assertDensewireError(() => decodeTableMsgpack(enc({ name: "t", rows: 1, columns: [{ name: "s", type: "string", data: [1] }] })), { category: "invalid_field", field: "columns[0].data[0]" });
    assertDensewireError(() => decodeTableMsgpack(enc([1])), { category: "malformed", offset: 0 });
  });
  it("views bins in place when aligned, copies otherwise", () => {
    const body = encodeTableMsgpack(makeTable("t", [{ name: "x", type: "float64", values: new Float64Array([1, 2, 3]) }]));
    const t = decodeTableMsgpack(body);
    const v = t.columns[0]!.values as Float64Array;
    assert.deepEqual(Array.from(v), [1, 2, 3]);
    const offset = body.indexOf(0xc4) + 2; // bin8 payload
    assert.equal(v.buffer === body.buffer, offset % 8 === 0);
    // the same bytes placed so that the payload is aligned: a view
    const shifted = new Uint8Array(body.length + 8);
    const at = (8 - (offset % 8)) % 8;
    shifted.set(body, at);
    const u = decodeTableMsgpack(shifted.subarray(at, at + body.length)).columns[0]!.values as Float64Array;
    assert.equal(u.buffer, shifted.buffer);
  });
});

describe("tables: Protobuf", () => {
  it("decodes what the generated schema writes, and the generated schema reads ours", () => {
    const t = everyType(3);
    const ours = encodeTableProtobuf(t);
    const m = fromBinary(pb.TableSchema, ours);
    assert.equal(m.rows, 3n);
    assert.deepEqual(m.columns.map((c) => c.encoding), [0, 1, 1, 1, 1, 0, 1, 1]);
    assert.equal(m.columns[7]!.dimensions, 3);
    const theirs = toBinary(pb.TableSchema, create(pb.TableSchema, { name: "x", rows: 2n, columns: [{ name: "b", type: pb.ColumnType.BOOL, data: new Uint8Array([0, 1]) }] }));
    assert.deepEqual(Array.from(decodeTableProtobuf(theirs).columns[0]!.values as Uint8Array), [0, 1]);
  });
  it("returns views of aligned PLAIN data, fresh buffers for byte-stream-split", () => {
    const t = makeTable("t", [{ name: "x", type: "float64", values: new Float64Array([1, 2]) }]);
    const plain = encodeTableProtobuf(t, { byteStreamSplit: false });
    const dataAt = plain.length - 16;
    const buf = new Uint8Array(plain.length + 8);
    const at = (8 - (dataAt % 8)) % 8;
    buf.set(plain, at);
    const v = decodeTableProtobuf(buf.subarray(at, at + plain.length)).columns[0]!.values as Float64Array;
    assert.equal(v.buffer, buf.buffer);
    const split = decodeTableProtobuf(encodeTableProtobuf(t)).columns[0]!.values as Float64Array;
    assert.deepEqual(Array.from(split), [1, 2]);
  });
  it("reports wire errors at the tag, and truncation at the body's length", () => {
    const body = encodeTableProtobuf(makeTable("t", [{ name: "x", type: "int32", values: new Int32Array([1]) }]));
    assertDensewireError(() => decodeTableProtobuf(body.subarray(0, body.length - 1)), { category: "truncated", offset: body.length - 1 });
    assertDensewireError(() => decodeTableProtobuf(new Uint8Array([0x10, 0x01, 0x1a, 0x02, 0x10])), { category: "truncated", offset: 5 });
    assertDensewireError(() => decodeTableProtobuf(new Uint8Array([0x0d, 1, 2, 3, 4])), { category: "malformed", offset: 0, field: "name" });
    // a length running past its embedded message but not past the body: malformed at the inner tag; past the body: truncated
    assertDensewireError(() => decodeTableProtobuf(new Uint8Array([0x1a, 0x02, 0x2a, 0x05, 0, 0, 0, 0, 0, 0])), { category: "malformed", offset: 2 });
    assertDensewireError(() => decodeTableProtobuf(new Uint8Array([0x1a, 0x02, 0x2a, 0x05])), { category: "truncated", offset: 4 });
    // a column with dimensions on a non-vector type
    const bad = toBinary(pb.TableSchema, create(pb.TableSchema, { rows: 1n, columns: [{ name: "a", type: pb.ColumnType.INT32, dimensions: 2, data: new Uint8Array(4) }] }));
    assertDensewireError(() => decodeTableProtobuf(bad), { category: "invalid_field", field: "columns[0].dimensions" });
  });
});

describe("tables: Arrow", () => {
  it("rejects a column whose Arrow type disagrees with densewire.type, and nulls", async () => {
    const A = await import("apache-arrow");
    const field = new A.Field("x", new A.Int32(), true, new Map([["densewire.type", "int64"]]));
    const data = A.makeData({ type: new A.Int32(), length: 1, nullCount: 0, data: new Int32Array([1]) });
    const schema = new A.Schema([field]);
    const batch = new A.RecordBatch(schema, A.makeData({ type: new A.Struct([field]), length: 1, nullCount: 0, children: [data] }) as never);
    const body = A.RecordBatchStreamWriter.writeAll([batch]).toUint8Array(true);
    await assertDensewireErrorAsync(() => decodeTableArrow(body), { category: "invalid_field", field: "x" });

    const f2 = new A.Field("y", new A.Float64(), true, new Map([["densewire.type", "float64"]]));
    const withNull = A.makeData({ type: new A.Float64(), length: 2, nullCount: 1, nullBitmap: new Uint8Array([1]), data: new Float64Array([1, 2]) });
    const b2 = new A.RecordBatch(new A.Schema([f2]), A.makeData({ type: new A.Struct([f2]), length: 2, nullCount: 0, children: [withNull] }) as never);
    await assertDensewireErrorAsync(() => decodeTableArrow(A.RecordBatchStreamWriter.writeAll([b2]).toUint8Array(true)), { category: "invalid_field", field: "y" });
    await assertDensewireErrorAsync(() => decodeTableArrow(new Uint8Array([1, 2, 3])), { category: "malformed" });
  });
  it("concatenates several record batches and views a single one", async () => {
    const A = await import("apache-arrow");
    const t = makeTable("t", [{ name: "x", type: "float64", values: new Float64Array([1, 2, 3]) }]);
    const one = await decodeTableArrow(await encodeTableArrow(t));
    assert.ok((one.columns[0]!.values as Float64Array).byteOffset % 8 === 0);
    const f = new A.Field("x", new A.Float64(), false, new Map([["densewire.type", "float64"]]));
    const batches = [[1, 2], [3]].map((v) => new A.RecordBatch(new A.Schema([f]), A.makeData({ type: new A.Struct([f]), length: v.length, nullCount: 0, children: [A.makeData({ type: new A.Float64(), length: v.length, nullCount: 0, data: new Float64Array(v) })] }) as never));
    const two = await decodeTableArrow(A.RecordBatchStreamWriter.writeAll(batches).toUint8Array(true), { name: "given" });
    assert.equal(two.name, "given");
    assert.deepEqual(Array.from(two.columns[0]!.values as Float64Array), [1, 2, 3]);
  });
});
