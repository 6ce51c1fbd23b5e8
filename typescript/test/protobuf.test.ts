import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { type Tensor, decodeProtobuf, encodeProtobuf, makeTensor, pb } from "../src/index.js";
import { assertDensewireError, fromHex, tensorItems, toHex } from "./helpers.js";

const t = makeTensor("float32", [2, 3], Float32Array.from([1, -2.5, 0.1, 3, 0.5, -1]));
const data = toHex(new Uint8Array(t.data.buffer));
const meta = { model: "m", usage: { prompt_tokens: 7, total_tokens: 7 } };

describe("Protobuf", () => {
  it("agrees with the generated code (fromBinary) on what it encodes", () => {
    const body = encodeProtobuf(t, meta);
    const m = fromBinary(pb.EmbeddingsResponseSchema, body);
    assert.equal(m.model, "m");
    assert.deepEqual(m.embeddings?.shape, [2n, 3n]);
    assert.equal(m.embeddings?.dtype, pb.DType.DTYPE_FLOAT32);
    assert.equal(m.usage?.totalTokens, 7n);
    const d = decodeProtobuf(body, { message: "EmbeddingsResponse" });
    assert.deepEqual(tensorItems(d), tensorItems(t));
    assert.equal(d.model, "m");
    assert.deepEqual(d.usage, meta.usage);
    assert.equal(toHex(encodeProtobuf(t)), "0801120202031a18" + data);
    assert.equal(toHex(encodeProtobuf(t, { message: "EmbeddingsResponse" })), "12200801120202031a18" + data);
  });

  it("returns data as a view of the body when aligned", () => {
    const u8 = makeTensor("uint8", [1, 3], Uint8Array.from([1, 2, 3]));
    const body = encodeProtobuf(u8);
    assert.equal(decodeProtobuf(body).data.buffer, body.buffer);
    // an unknown 4-byte field in front puts the float payload at offset 12
    const aligned = fromHex("3202abcd" + "080112020203" + "1a18" + data + "00");
    assert.equal(decodeProtobuf(aligned.subarray(0, aligned.length - 1)).data.buffer, aligned.buffer);
  });

  it("accepts unpacked shape, unknown fields of every wire type, repeated fields", () => {
    const body = fromHex(
      "08011002" + "1003" + // dtype, shape unpacked
        "2001" + "29" + "0102030405060708" + "3202abcd" + "3d01020304" + "43" + "4801" + "44" + // unknown varint, fixed64, bytes, fixed32, group
        "0805" + "0801" + // dtype twice: the last wins
        "1a00" + "1a18" + data, // data twice: the last wins
    );
    const d = decodeProtobuf(body);
    assert.deepEqual(d.shape, [2, 3]);
    assert.deepEqual(tensorItems(d), tensorItems(t));
    // embeddings seen twice are merged
    const merged = fromHex("1202" + "0801" + "121e" + "12020203" + "1a18" + data);
    assert.deepEqual(tensorItems(decodeProtobuf(merged, { message: "EmbeddingsResponse" })), tensorItems(t));
    const twoShapes = fromHex("1206" + "0801" + "12020203" + "1204" + "12020203");
    assertDensewireError(() => decodeProtobuf(twoShapes, { message: "EmbeddingsResponse" }), { category: "invalid_field", field: "embeddings.shape" });
  });

  it("locates wire errors at the tag or varint", () => {
    assertDensewireError(() => decodeProtobuf(fromHex("0a00")), { category: "malformed", offset: 0, field: "dtype" });
    assertDensewireError(() => decodeProtobuf(fromHex("0801150000803f")), { category: "malformed", offset: 2, field: "shape" });
    assertDensewireError(() => decodeProtobuf(fromHex("0801" + "07")), { category: "malformed", offset: 2 }); // wire type 7
    assertDensewireError(() => decodeProtobuf(fromHex("0801" + "00")), { category: "malformed", offset: 2 }); // field 0
    assertDensewireError(() => decodeProtobuf(fromHex("0801" + "2b" + "2001" + "34")), { category: "malformed", offset: 5 }); // group end mismatch
    // a length past the end of an embedded message (but inside the body)
    const nested = fromHex("1204" + "08011a05" + "000000000000");
    assertDensewireError(() => decodeProtobuf(nested, { message: "EmbeddingsResponse" }), { category: "malformed", offset: 4 });
    // a packed varint running past its payload: at the packed field's tag
    assertDensewireError(() => decodeProtobuf(fromHex("0801120202831a00")), { category: "malformed", offset: 2, field: "shape" });
    assertDensewireError(() => decodeProtobuf(fromHex("0801120201ff")), { category: "malformed", offset: 2, field: "shape" });
    assertDensewireError(() => decodeProtobuf(fromHex("0a0280ff"), { message: "EmbeddingsResponse" }), { category: "malformed", offset: 0, field: "model" });
  });

  it("reports truncation at the body's length; field-boundary prefixes fail as incomplete messages", () => {
    const body = encodeProtobuf(t, meta);
    const withoutUsage = body.length - 6; // "1a0408071007": a valid message ends where usage begins
    assert.equal(decodeProtobuf(body.subarray(0, withoutUsage), { message: "EmbeddingsResponse" }).usage, undefined);
    for (let len = 0; len < body.length; len++) {
      if (len === withoutUsage) continue;
      let caught: unknown;
      try {
        decodeProtobuf(body.subarray(0, len), { message: "EmbeddingsResponse" });
      } catch (e) {
        caught = e;
      }
      const e = caught as { category?: string; offset?: number };
      assert.ok(e !== undefined, `prefix ${len} decoded`);
      if (e.category === "truncated") assert.equal(e.offset, len);
      else assert.ok(["invalid_field"].includes(e.category!), `prefix ${len}: ${String(e.category)}`);
    }
  });

  it("names invalid fields", () => {
    assertDensewireError(() => decodeProtobuf(fromHex("120101")), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => decodeProtobuf(fromHex("0800120101")), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => decodeProtobuf(fromHex("0808120101")), { category: "unknown_dtype", field: "dtype" });
    assertDensewireError(() => decodeProtobuf(fromHex("0801120301" + "0101")), { category: "invalid_field", field: "shape" });
    assertDensewireError(() => decodeProtobuf(fromHex("080112020101")), { category: "length_mismatch", offset: 0, field: "data" });
    assertDensewireError(() => decodeProtobuf(fromHex("0a016d"), { message: "EmbeddingsResponse" }), { category: "invalid_field", field: "embeddings" });
    assertDensewireError(() => decodeProtobuf(fromHex("12021200"), { message: "EmbeddingsResponse" }), { category: "invalid_field", field: "embeddings.dtype" });
    // 2^53 + 1 does not fit a safe integer
    assertDensewireError(() => decodeProtobuf(fromHex("08011209" + "01" + "8180808080808010")), { category: "invalid_field", field: "shape" });
  });

  it("round-trips every dtype", () => {
    const tensors: Tensor[] = [
      makeTensor("float16", [1, 2], Uint16Array.from([0x7e01, 0x8000])),
      makeTensor("bfloat16", [1, 1], Uint16Array.from([0xff80])),
      makeTensor("float64", [1, 1], Float64Array.from([-0])),
      makeTensor("int8", [0, 5], new Int8Array(0)),
      makeTensor("binary", [1, 20], Uint8Array.from([1, 2, 0x30])),
    ];
    for (const x of tensors) {
      const back = decodeProtobuf(encodeProtobuf(x));
      assert.equal(back.dtype, x.dtype);
      assert.deepEqual(back.shape, x.shape);
      assert.deepEqual(tensorItems(back), tensorItems(x));
    }
  });
});
