import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  byteStreamSplit,
  byteStreamUnsplit,
  columnsHeader,
  encodeColumnName,
  isColumnType,
  makeTable,
  parseColumnType,
  parseColumnsHeader,
  parseUuid,
  tableColumn,
  tableFormatOfContentType,
  typeWidth,
  uuidToString,
} from "../src/index.js";
import { assertDensewireError } from "./helpers.js";

describe("tables: column types", () => {
  it("knows the types of SPEC.md 15.1 and nothing else", () => {
    for (const t of ["bool", "int32", "int64", "float32", "float64", "string", "uuid", "float32[1]", "float32[384]"]) assert.ok(isColumnType(t), t);
    for (const t of ["Bool", "float16", "float32[0]", "float32[01]", "float32[]", "float64[3]", "float32[ 3]", "", 3]) assert.ok(!isColumnType(t), String(t));
    assertDensewireError(() => parseColumnType("float32[0]", "x"), { category: "unknown_dtype", field: "x" });
    assertDensewireError(() => parseColumnType(7, "x"), { category: "invalid_field", field: "x" });
    assert.deepEqual(["bool", "int32", "int64", "float64", "uuid", "float32[3]", "string"].map((t) => typeWidth(t as never)), [1, 4, 8, 8, 16, 12, 0]);
  });
});

describe("tables: Densewire-Columns", () => {
  it("parses the spec's example and percent-encoded names", () => {
    assert.deepEqual(parseColumnsHeader("uuid=uuid,status=int32,embedding=float32[384]"), [
      { name: "uuid", type: "uuid" },
      { name: "status", type: "int32" },
      { name: "embedding", type: "float32[384]" },
    ]);
    assert.deepEqual(parseColumnsHeader("name%20with%20space%2F%C3%A9=int32,a%3Db%2Cc=string"), [
      { name: "name with space/é", type: "int32" },
      { name: "a=b,c", type: "string" },
    ]);
    assert.deepEqual(parseColumnsHeader(""), []);
  });

  it("writes what it reads, encoding every byte outside the unreserved set", () => {
    const specs = [
      { name: "name with space/é", type: "int32" as const },
      { name: "a-b.c_d~e", type: "float32[2]" as const },
    ];
    assert.equal(encodeColumnName("é,="), "%C3%A9%2C%3D");
    assert.equal(columnsHeader(specs), "name%20with%20space%2F%C3%A9=int32,a-b.c_d~e=float32[2]");
    assert.deepEqual(parseColumnsHeader(columnsHeader(specs)), specs);
  });

  it("rejects malformed entries naming the header, unknown types as unknown_dtype", () => {
    const field = "Densewire-Columns";
    assertDensewireError(() => parseColumnsHeader("a=int32,b"), { category: "invalid_field", field });
    assertDensewireError(() => parseColumnsHeader("a%2=int32"), { category: "invalid_field", field });
    assertDensewireError(() => parseColumnsHeader("a%zz=int32"), { category: "invalid_field", field });
    assertDensewireError(() => parseColumnsHeader("%C3=int32"), { category: "invalid_field", field }); // not UTF-8
    assertDensewireError(() => parseColumnsHeader("=int32"), { category: "invalid_field", field });
    assertDensewireError(() => parseColumnsHeader("a=int32,a=bool"), { category: "invalid_field", field });
    assertDensewireError(() => parseColumnsHeader("a=int16"), { category: "unknown_dtype", field });
  });
});

describe("tables: UUIDs", () => {
  it("round-trips the canonical text, accepting uppercase", () => {
    const b = parseUuid("123E4567-e89b-12d3-A456-426614174000");
    assert.deepEqual(Array.from(b.subarray(0, 4)), [0x12, 0x3e, 0x45, 0x67]);
    assert.equal(uuidToString(b, 0), "123e4567-e89b-12d3-a456-426614174000");
    const two = new Uint8Array(32);
    two.set(b, 16);
    assert.equal(uuidToString(two, 1), "123e4567-e89b-12d3-a456-426614174000");
    assert.equal(uuidToString(two, 0), "00000000-0000-0000-0000-000000000000");
    assert.throws(() => uuidToString(two, 2), RangeError);
  });

  it("rejects anything else as invalid_field", () => {
    for (const s of ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456-4266141740000"]) {
      assertDensewireError(() => parseUuid(s, "id"), { category: "invalid_field", field: "id" });
    }
  });
});

describe("tables: byte-stream-split", () => {
  it("follows the spec's layout: byte k of item i at data[k*m + i]", () => {
    const plain = new Uint8Array(new Uint32Array([0x04030201, 0x08070605]).buffer);
    const split = byteStreamSplit(plain, 4);
    assert.deepEqual(Array.from(split), [1, 5, 2, 6, 3, 7, 4, 8]);
    assert.deepEqual(Array.from(byteStreamUnsplit(split, 4)), Array.from(plain));
  });

  it("round-trips every width, including ones not a multiple of 4 (the per-stream loop)", () => {
    for (const w of [2, 3, 4, 8, 12, 16]) {
      for (const m of [0, 1, 5, 1000]) {
        const plain = Uint8Array.from({ length: m * w }, (_, i) => (i * 131 + 7) & 0xff);
        const split = byteStreamSplit(plain, w);
        const back = byteStreamUnsplit(split, w);
        assert.deepEqual(back, plain, `w=${w} m=${m}`);
        assert.equal(back.byteOffset, 0);
      }
    }
  });
});

describe("tables: makeTable", () => {
  it("checks names, array types and lengths", () => {
    const t = makeTable("t", [
      { name: "a", type: "int32", values: new Int32Array([1, 2]) },
      { name: "v", type: "float32[2]", values: new Float32Array(4), dimensions: 2 },
      { name: "id", type: "uuid", values: new Uint8Array(32) },
    ]);
    assert.equal(t.rows, 2);
    assert.equal(tableColumn(t, "v")?.dimensions, 2);
    assert.equal(tableColumn(t, "nope"), undefined);
    assertDensewireError(() => makeTable("t", [{ name: "a", type: "int32", values: new Float64Array(2) as never }]), { category: "invalid_field", field: "a" });
    assertDensewireError(
      () => makeTable("t", [{ name: "a", type: "int32", values: new Int32Array(2) }, { name: "b", type: "bool", values: new Uint8Array(3) }]),
      { category: "shape_mismatch", field: "b" },
    );
    assertDensewireError(() => makeTable("t", [{ name: "id", type: "uuid", values: new Uint8Array(17) }]), { category: "shape_mismatch", field: "id" });
    assertDensewireError(
      () => makeTable("t", [{ name: "a", type: "bool", values: new Uint8Array(1) }, { name: "a", type: "bool", values: new Uint8Array(1) }]),
      { category: "invalid_field", field: "columns[1].name" },
    );
  });

  it("maps media types (with aliases and parameters) to formats", () => {
    assert.equal(tableFormatOfContentType("text/csv; charset=utf-8; header=present"), "csv");
    assert.equal(tableFormatOfContentType("application/x-protobuf"), "protobuf");
    assert.equal(tableFormatOfContentType("Application/Vnd.Densewire.Rows+JSON"), "json-rows");
    assert.equal(tableFormatOfContentType("application/octet-stream"), undefined);
  });
});
