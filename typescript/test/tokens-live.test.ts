/**
 * Per-token embeddings from a real `densewire serve` (TEI's POST /embed_all, SPEC.md 20): the server
 * with the built-in MiniLM model, DENSEWIRE_OVERLOAD_URL when set (scripts/test.sh starts it; the hash
 * model of DENSEWIRE_SERVER_URL has no token states), else one started from the repository's .venv.
 * Every format gives the same matrices, bit for bit, as TEI's JSON shape of the same texts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DensewireClient, type Format, type RaggedTensor, raggedMatrix } from "../src/index.js";
import { Server } from "./browser.js";

const texts = ["a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"];

function bits(t: RaggedTensor): number[] {
  return Array.from(new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 4));
}

describe("token embeddings from densewire serve", () => {
  let server: Server | undefined;
  let url = process.env["DENSEWIRE_OVERLOAD_URL"];
  before(async () => {
    if (url === undefined) {
      server = await Server.start(["--no-demo-tables", "--blas-threads", "1"]);
      url = server.url;
    }
  });
  after(() => server?.stop());
  const client = (format: Format) => new DensewireClient({ baseURL: `${url}/v1`, apiKey: process.env["DENSEWIRE_API_KEY"], formats: [format], maxRetries: 8 });

  it("every format gives TEI's JSON matrices bit for bit, over one buffer", async () => {
    const tei = await client("json").embedTokens(texts);
    assert.equal(tei.shape[0], 3);
    assert.equal(tei.shape[1], 384);
    const tokens = Array.from({ length: 3 }, (_, i) => raggedMatrix(tei, i).shape[0]);
    assert.ok(tokens[1]! < tokens[0]! && tokens[0]! < tokens[2]!, `token counts ${tokens}`);
    assert.ok(tokens[1]! >= 3, "special tokens are included");
    for (const format of ["raw", "msgpack", "protobuf", "arrow"] as Format[]) {
      const t = await client(format).embedTokens(texts);
      assert.equal(t.dtype, "float32", format);
      assert.deepEqual(Array.from(t.offsets), Array.from(tei.offsets), format);
      assert.deepEqual(bits(t), bits(tei), format);
      assert.equal(raggedMatrix(t, 2).data.buffer, t.data.buffer, `${format}: matrices are views`);
    }
  });
});
