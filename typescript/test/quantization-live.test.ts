/**
 * int8/uint8 against a real `densewire serve` (SPEC.md section 17): DENSEWIRE_SERVER_URL when set
 * (scripts/test.sh starts one), else one started from the repository's .venv with the hash model.
 * The server's codes must be exactly what this library's quantize gives for the server's own float32
 * answer with the published ranges, and dequantize: true must give dequantize of those codes.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DensewireClient, type Embeddings, type Format, dequantize, quantize } from "../src/index.js";
import { Server } from "./browser.js";
import { tensorItems } from "./helpers.js";

const texts = ["a cat sits on the mat", "a dog sleeps", "the quick brown fox"];

describe("quantized embeddings from densewire serve", () => {
  let server: Server | undefined;
  let url = process.env["DENSEWIRE_SERVER_URL"];
  before(async () => {
    if (url === undefined) {
      server = await Server.start(["--model", "hash:384", "--no-demo-tables"]);
      url = server.url;
    }
  });
  after(() => server?.stop());
  const client = () => new DensewireClient({ baseURL: `${url}/v1`, apiKey: process.env["DENSEWIRE_API_KEY"] });

  for (const dimensions of [undefined, 128]) {
    for (const format of ["raw", "msgpack", "protobuf", "arrow", "json"] as Format[]) {
      it(`${format}${dimensions ? `, dimensions ${dimensions}` : ""}: the codes are quantize of the float32 answer, dequantize: true their dequantize`, async () => {
        const c = new DensewireClient({ baseURL: `${url}/v1`, apiKey: process.env["DENSEWIRE_API_KEY"], formats: [format] });
        const floats = await c.embed(texts, { dimensions });
        for (const dtype of ["int8", "uint8"] as const) {
          const codes = await c.embed(texts, { dtype, dimensions });
          assert.equal(codes.dtype, dtype);
          assert.match(codes.quantization ?? "", /^[0-9a-f]{16}$/, "the response names its ranges");
          const q = await c.quantization(codes.quantization!);
          assert.equal(q.dimensions, codes.shape[1]);
          assert.deepEqual(tensorItems(quantize(floats, q, dtype)), tensorItems(codes));
          const back = await c.embed(texts, { dtype, dimensions, dequantize: true });
          assert.deepEqual(tensorItems(back), tensorItems(dequantize(codes as Embeddings<"int8">, q)));
        }
      });
    }
  }

  it("another dimensions has other ranges, each published under its id", async () => {
    const c = client();
    const full = await c.embed(texts, { dtype: "int8" });
    const cut = await c.embed(texts, { dtype: "int8", dimensions: 64 });
    assert.notEqual(full.quantization, cut.quantization);
    assert.equal((await c.quantization(cut.quantization!)).dimensions, 64);
  });
});
