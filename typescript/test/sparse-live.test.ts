/**
 * Sparse vectors from a real `densewire serve` (TEI's POST /embed_sparse, SPEC.md 20): the hash model of
 * DENSEWIRE_SERVER_URL (scripts/test.sh starts it), else one started from the repository's .venv. Every
 * format gives TEI's JSON vectors bit for bit; the server's errors arrive as DensewireHTTPError.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DensewireClient, DensewireError, DensewireHTTPError, type Format, type SparseTensor, decodeSparseResponse, sparseVector } from "../src/index.js";
import { Server } from "./browser.js";

const texts = ["a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"];

function bits(t: SparseTensor): number[] {
  return Array.from(new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 4));
}

describe("sparse vectors from densewire serve", () => {
  let server: Server | undefined;
  let url = process.env["DENSEWIRE_SERVER_URL"];
  before(async () => {
    if (url === undefined) {
      server = await Server.start(["--model", "hash:384", "--no-demo-tables"]);
      url = server.url;
    }
  });
  after(() => server?.stop());
  const client = (format: Format) => new DensewireClient({ baseURL: `${url}/v1`, apiKey: process.env["DENSEWIRE_API_KEY"], formats: [format], maxRetries: 8 });

  it("every format gives TEI's JSON vectors bit for bit, over one buffer", async () => {
    const tei = await client("json").embedSparse(texts);
    assert.equal(tei.shape[0], 3);
    assert.equal(tei.dtype, "float32");
    for (let i = 0; i < 3; i++) assert.ok(sparseVector(tei, i).indices.length > 0, `text ${i} has non-zero weights`);
    assert.notDeepEqual(Array.from(sparseVector(tei, 0).indices), Array.from(sparseVector(tei, 2).indices));
    for (const format of ["raw", "msgpack", "protobuf", "arrow"] as Format[]) {
      const t = await client(format).embedSparse(texts);
      assert.equal(t.dtype, "float32", format);
      assert.ok(t.shape[1] >= tei.shape[1], `${format}: vocabulary ${t.shape[1]} holds TEI's largest index ${tei.shape[1] - 1}`);
      assert.deepEqual(Array.from(t.offsets), Array.from(tei.offsets), format);
      assert.deepEqual(Array.from(t.indices), Array.from(tei.indices), format);
      assert.deepEqual(bits(t), bits(tei), format);
    }
    const raw = await client("raw").embedSparse(texts);
    assert.equal(sparseVector(raw, 1).indices.buffer, raw.indices.buffer, "vectors are views");
    const json = await client("json").embedSparse(texts, { vocabSize: raw.shape[1] });
    assert.equal(json.shape[1], raw.shape[1], "vocabSize gives TEI's JSON the vocabulary");
  });

  it("the hash model's documented vector, and max_active_dims keeps the largest weights", async () => {
    // the hash:D rule (python/src/densewire/_backends/hash.py): blake2b of each word, index x % 30522, weight ((x >> 40) + 1) / 2^24
    const t = await client("raw").embedSparse("hello world hello");
    assert.deepEqual([t.shape, Array.from(t.indices), Array.from(t.data)], [[1, 30522], [26240, 26746], [Math.fround(0.827504), Math.fround(0.3063963)]]);
    const top = await client("msgpack").embedSparse(["hello world hello", texts[2]!], { maxActiveDims: 1 });
    assert.deepEqual(Array.from(top.offsets), [0, 1, 2]);
    assert.deepEqual(Array.from(sparseVector(top, 0).indices), [26240]);
  });

  it("a text over the model's limit with truncate false is the server's 413, named", async () => {
    const long = "word ".repeat(9000);
    await assert.rejects(client("raw").embedSparse([long], { truncate: false }), (e: unknown) => {
      assert.ok(e instanceof DensewireHTTPError, String(e));
      assert.equal(e.status, 413);
      assert.match(e.message, /tokens/);
      return true;
    });
    const cut = await client("raw").embedSparse([long, "short"], { truncate: true });
    assert.equal(cut.shape[0], 2);
  });

  it("an empty input list is refused before any request", async () => {
    await assert.rejects(client("raw").embedSparse([]), TypeError);
  });
});

describe("TEI's sparse JSON", () => {
  const answer = (body: string) => new Response(body, { headers: { "Content-Type": "application/json" } });
  it("reads [[{index, value}]] into one indices and one values array, the vocabulary one past the largest index", async () => {
    const t = await decodeSparseResponse(answer('[[{"index":1,"value":0.5},{"index":7,"value":2}],[]]'));
    assert.deepEqual([t.shape, Array.from(t.offsets), Array.from(t.indices), Array.from(t.data)], [[2, 8], [0, 2, 2], [1, 7], [0.5, 2]]);
    assert.equal((await decodeSparseResponse(answer('[[{"index":1,"value":0.5}]]'), 0, 30522)).shape[1], 30522);
  });
  for (const [body, category, field] of [
    ['[[{"index":-1,"value":1}]]', "invalid_field", "[0][0].index"],
    ['[[{"index":1.5,"value":1}]]', "invalid_field", "[0][0].index"],
    ['[[{"index":1,"value":"x"}]]', "invalid_field", "[0][0].value"],
    ['[[{"index":3,"value":1},{"index":2,"value":1}]]', "invalid_field", "indices"],
    ['{"index":1}', "invalid_field", "$"],
    ["[[", "malformed", undefined],
  ] as const) {
    it(`${body} is ${category}${field === undefined ? "" : ` at ${field}`}`, async () => {
      await assert.rejects(decodeSparseResponse(answer(body)), (e: unknown) => {
        assert.ok(e instanceof DensewireError, String(e));
        assert.equal(e.category, category);
        assert.equal(e.field, field);
        return true;
      });
    });
  }
});

describe("embedSparse retries", () => {
  it("retries a 503 as embed does, and the last attempt's error says how many were made", async () => {
    let calls = 0;
    let fail = 1;
    const fetchFn = async (url: string | URL | Request) => {
      calls++;
      assert.match(String(url), /\/embed_sparse$/);
      if (calls <= fail) return new Response('{"error":"model is overloaded","error_type":"Overloaded"}', { status: 503, headers: { "Content-Type": "application/json", "Retry-After": "0" } });
      return new Response('[[{"index":3,"value":1.5}]]', { headers: { "Content-Type": "application/json" } });
    };
    const c = new DensewireClient({ baseURL: "http://densewire.invalid/v1", fetch: fetchFn as typeof fetch, maxRetries: 2, backoffBaseMs: 1, backoffMaxMs: 1 });
    const t = await c.embedSparse("a");
    assert.deepEqual([calls, Array.from(t.indices)], [2, [3]]);
    calls = 0;
    fail = 10;
    await assert.rejects(c.embedSparse("a"), (e: unknown) => {
      assert.ok(e instanceof DensewireHTTPError, String(e));
      assert.equal(e.status, 503);
      assert.equal(calls, 3);
      assert.equal(e.attempts, 3);
      return true;
    });
  });
});
