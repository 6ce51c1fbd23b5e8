/** The KServe v2 reader beyond its golden cases (golden.test.ts): views, headers, the embeddings helper. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { INFERENCE_HEADER_CONTENT_LENGTH, decodeKServe, kserveEmbeddings, parseKServeDatatype } from "../src/index.js";
import { assertDensewireError } from "./helpers.js";

/** A binary-extension body: the JSON header padded with spaces to `align` bytes, then the blobs. */
function body(outputs: object[], blobs: Uint8Array[], top: object = {}, align = 4): { bytes: Uint8Array; h: number } {
  let header = JSON.stringify({ ...top, outputs });
  header += " ".repeat((align - (header.length % align)) % align);
  const total = header.length + blobs.reduce((n, b) => n + b.length, 0);
  const bytes = new Uint8Array(total);
  bytes.set(new TextEncoder().encode(header));
  let at = header.length;
  for (const b of blobs) bytes.set(b, (at += b.length) - b.length);
  return { bytes, h: header.length };
}

describe("KServe v2 reader", () => {
  const f32 = new Uint8Array(Float32Array.from([1, -2.5, 0.5, 4]).buffer);
  const outputs = [{ name: "embedding", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 16 } }];

  it("gives an aligned blob as a view over the body, with fetch Headers", () => {
    const { bytes, h } = body(outputs, [f32], { model_name: "m", model_version: "1", id: "r1" });
    const r = decodeKServe(bytes.buffer as ArrayBuffer, new Headers({ [INFERENCE_HEADER_CONTENT_LENGTH]: String(h) }));
    const t = r.outputs.get("embedding")!.tensor!;
    assert.equal(t.data.buffer, bytes.buffer);
    assert.equal(t.data.byteOffset, h);
    assert.deepEqual([r.modelName, r.modelVersion, r.id], ["m", "1", "r1"]);
    bytes[h + 3] = 0x40; // the view sees the body: 1.0 (0x3f800000) becomes 4.0 (0x40800000)
    assert.equal(t.data[0], 4);
  });

  it("copies an unaligned blob once, with the same values", () => {
    const { bytes, h } = body(outputs, [f32], {}, 1);
    const headers = { "inference-header-content-length": String(h) };
    const aligned = h % 4 === 0;
    const t = decodeKServe(bytes, headers).outputs.get("embedding")!.tensor!;
    assert.deepEqual(Array.from(t.data), [1, -2.5, 0.5, 4]);
    assert.equal(t.data.buffer === bytes.buffer, aligned);
  });

  it("reads embeddings with the model and the quantization id", () => {
    const q = [{ name: "embedding", datatype: "INT8", shape: [1, 3], parameters: { quantization: "455fc59476466b04" }, data: [[-128, 0, 127]] }];
    const e = kserveEmbeddings(decodeKServe(new TextEncoder().encode(JSON.stringify({ model_name: "m", outputs: q }))));
    assert.deepEqual([e.dtype, e.shape, Array.from(e.data), e.model, e.quantization], ["int8", [1, 3], [-128, 0, 127], "m", "455fc59476466b04"]);
    assertDensewireError(() => kserveEmbeddings(decodeKServe(new TextEncoder().encode('{"outputs":[]}'))), { category: "invalid_field", field: "outputs" });
  });

  it("names datatypes without a densewire dtype", () => {
    assert.equal(parseKServeDatatype("BF16"), "BF16");
    assertDensewireError(() => parseKServeDatatype("INT64", "outputs[0].datatype"), { category: "unknown_dtype", field: "outputs[0].datatype" });
    assertDensewireError(() => parseKServeDatatype("fp32"), { category: "unknown_dtype", field: "datatype" });
  });
});
