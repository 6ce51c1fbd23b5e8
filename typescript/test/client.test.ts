import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  type Embeddings,
  type Format,
  DensewireClient,
  DensewireError,
  DensewireHTTPError,
  MEDIA_TYPES,
  acceptHeader,
  decodeResponse,
  encodeMsgpack,
  formatOfContentType,
  fromFloat32,
  makeTensor,
} from "../src/index.js";
import { type FakeServer, fakeEmbedding, negotiate, startFakeServer } from "./server.js";
import { type GoldenCase, assertDensewireError, assertTensor, fromHex, loadGolden, tensorItems } from "./helpers.js";

const texts = ["a cat", "a dog sleeps", "the quick brown fox"];

function expected(list: string[], dtype: "float32" | "float16" | "bfloat16" | "binary", d = 384) {
  const values = new Float32Array(list.length * d);
  list.forEach((t, i) => values.set(fakeEmbedding(t, 384).subarray(0, d), i * d));
  return fromFloat32(values, [list.length, d], dtype);
}

describe("negotiation helpers", () => {
  it("asks for raw, then MessagePack, then Protobuf, with JSON as the fallback", () => {
    assert.equal(acceptHeader(), "application/octet-stream, application/vnd.msgpack;q=0.9, application/protobuf;q=0.8, application/json;q=0.5");
    assert.equal(acceptHeader(["arrow", "json"]), "application/vnd.apache.arrow.stream, application/json;q=0.5");
    assert.equal(negotiate(acceptHeader()), "raw");
    assert.equal(negotiate(acceptHeader(["protobuf", "msgpack", "json"])), "protobuf");
    assert.throws(() => acceptHeader(["xml" as Format]), /unknown format/);
  });

  it("reads Content-Type with parameters, case and aliases", () => {
    assert.equal(formatOfContentType("application/json; charset=utf-8"), "json");
    assert.equal(formatOfContentType("Application/X-MsgPack"), "msgpack");
    assert.equal(formatOfContentType("application/x-protobuf"), "protobuf");
    assert.equal(formatOfContentType("application/vnd.apache.arrow.stream"), "arrow");
    assert.equal(formatOfContentType("text/html"), undefined);
    assert.equal(formatOfContentType(null), undefined);
  });
});

describe("client against a densewire server", () => {
  let server: FakeServer;
  before(async () => {
    server = await startFakeServer();
  });
  after(() => server.close());

  it("gets a raw body by default and decodes it to the server's bits", async () => {
    const client = new DensewireClient({ baseURL: server.url });
    const e = await client.embed(texts, { model: "mini" });
    assert.deepEqual(tensorItems(e), tensorItems(expected(texts, "float32")));
    assert.equal(e.model, "mini");
    assert.deepEqual(e.usage, { prompt_tokens: 9, total_tokens: 9 });
    const req = server.requests.at(-1)!;
    assert.deepEqual(req.body, { input: texts, model: "mini", encoding_format: "base64" });
    assert.equal(req.headers.accept, acceptHeader());
    assert.equal(req.headers["content-type"], "application/json");
  });

  for (const format of ["raw", "msgpack", "protobuf", "arrow", "json"] as Format[]) {
    for (const dtype of ["float32", "float16", "bfloat16", "binary"] as const) {
      it(`decodes ${format} responses of ${dtype}`, async () => {
        const client = new DensewireClient({ baseURL: server.url, formats: [format] });
        const e = await client.embed(texts, { dtype, dimensions: 100 });
        assert.deepEqual(tensorItems(e), tensorItems(expected(texts, dtype, 100)));
        assert.deepEqual(e.shape, [3, 100]);
        const req = server.requests.at(-1)!;
        assert.equal(req.body["dtype"], dtype === "float32" ? undefined : dtype);
        assert.equal(req.body["dimensions"], 100);
      });
    }
  }

  it("sends the API key and extra headers; per-call formats override the client's", async () => {
    const client = new DensewireClient({ baseURL: server.url + "/", apiKey: "secret", headers: { "X-Trace": "t1" } });
    const e = await client.embed("one", { formats: ["msgpack", "json"], truncate: false });
    assert.deepEqual(e.shape, [1, 384]);
    const req = server.requests.at(-1)!;
    assert.equal(req.headers.authorization, "Bearer secret");
    assert.equal(req.headers["x-trace"], "t1");
    assert.equal(req.headers.accept, "application/vnd.msgpack, application/json;q=0.5");
    assert.equal(req.body["truncate"], false);
  });

  it("turns error envelopes into DensewireHTTPError", async () => {
    const client = new DensewireClient({ baseURL: server.url });
    await assert.rejects(client.embed(["x"], { dtype: "float8" as never }), (e: unknown) => {
      assert.ok(e instanceof DensewireHTTPError);
      assert.equal(e.status, 400);
      assert.equal(e.code, "unknown_dtype");
      assert.equal(e.param, "dtype");
      assert.equal(e.type, "invalid_request_error");
      assert.match(e.message, /dtype: unknown dtype float8/);
      return true;
    });
    await assert.rejects(new DensewireClient({ baseURL: server.url, apiKey: "wrong" }).embed("x"), { name: "DensewireHTTPError", status: 401, code: "unauthorized" });
    await assert.rejects(client.embed([""]), { status: 422, code: "invalid_field", param: "input" });
    await assert.rejects(new DensewireClient({ baseURL: server.url.replace("/v1", "/v2") }).embed("x"), { status: 404, code: "not_found" });
    await assert.rejects(client.embed([]), TypeError);
  });

  it("reads compressed responses (Content-Encoding: gzip)", async () => {
    const gz = await startFakeServer({ gzip: true });
    try {
      for (const format of ["raw", "msgpack", "json"] as Format[]) {
        const e = await new DensewireClient({ baseURL: gz.url, formats: [format] }).embed(texts);
        assert.deepEqual(tensorItems(e), tensorItems(expected(texts, "float32")));
      }
      assert.match(String(gz.requests[0]!.headers["accept-encoding"]), /gzip/);
    } finally {
      await gz.close();
    }
  });

  it("cancels with an AbortSignal", async () => {
    const slow = await startFakeServer({ delayMs: 2000 });
    try {
      const client = new DensewireClient({ baseURL: slow.url });
      const started = Date.now();
      await assert.rejects(client.embed("x", { signal: AbortSignal.timeout(50) }), (e: Error) => ["AbortError", "TimeoutError"].includes(e.name));
      assert.ok(Date.now() - started < 1500);
      const aborted = new AbortController();
      aborted.abort();
      await assert.rejects(client.embed("x", { signal: aborted.signal }), { name: "AbortError" });
    } finally {
      await slow.close();
    }
  });
});

describe("client embedMany", () => {
  it("batches with bounded concurrency and keeps input order", async () => {
    const server = await startFakeServer({ delayMs: 10, dimensions: 16 });
    try {
      const client = new DensewireClient({ baseURL: server.url });
      const many = Array.from({ length: 1000 }, (_, i) => `text number ${i}`);
      const e = await client.embedMany(many, { batchSize: 64, concurrency: 3 });
      assert.deepEqual(e.shape, [1000, 16]);
      const want = new Float32Array(1000 * 16);
      many.forEach((t, i) => want.set(fakeEmbedding(t, 16), i * 16));
      assert.deepEqual(tensorItems(e), tensorItems(makeTensor("float32", [1000, 16], want)));
      assert.equal(server.requests.length, 16);
      assert.ok(server.maxInFlight <= 3 && server.maxInFlight >= 2, `max in flight ${server.maxInFlight}`);
      assert.deepEqual(e.usage, { prompt_tokens: 3000, total_tokens: 3000 });
      const half = await client.embedMany(many.slice(0, 10), { batchSize: 4, dtype: "float16" });
      assert.equal(half.dtype, "float16");
      assert.deepEqual(half.shape, [10, 16]);
      const none = await client.embedMany([], { dimensions: 8 });
      assert.deepEqual(none.shape, [0, 8]);
    } finally {
      await server.close();
    }
  });

  it("fails with the first error and stops the other batches", async () => {
    const server = await startFakeServer({ delayMs: 20, dimensions: 8 });
    try {
      const client = new DensewireClient({ baseURL: server.url });
      const many = Array.from({ length: 200 }, (_, i) => (i === 25 ? "" : `t${i}`));
      await assert.rejects(client.embedMany(many, { batchSize: 10, concurrency: 2 }), { name: "DensewireHTTPError", status: 422 });
      assert.ok(server.requests.length < 20, `${server.requests.length} requests made`);
      await assert.rejects(client.embedMany(["a"], { batchSize: 0 }), RangeError);
    } finally {
      await server.close();
    }
  });
});

describe("client against an OpenAI-compatible server", () => {
  it("decodes its JSON + Base64 envelope, rows placed by index, no densewire fields sent", async () => {
    const openai = await startFakeServer({ mode: "openai" });
    try {
      const client = new DensewireClient({ baseURL: openai.url, apiKey: "sk-x" });
      const e = await client.embed(texts, { model: "text-embedding-3-small", dtype: "float32" });
      assert.deepEqual(tensorItems(e), tensorItems(expected(texts, "float32")));
      assert.equal(e.model, "text-embedding-3-small");
      assert.deepEqual(Object.keys(openai.requests[0]!.body).sort(), ["encoding_format", "input", "model"]);
      await assert.rejects(client.embed(texts, { dtype: "float16" }), { status: 400, code: null, message: /Unrecognized request argument supplied: dtype/ });
    } finally {
      await openai.close();
    }
  });

  it("reports non-JSON error bodies and unknown content types", async () => {
    const html = await startFakeServer({ override: { status: 502, body: "<html>Bad Gateway</html>", contentType: "text/html" } });
    const text = await startFakeServer({ override: { status: 200, body: "hello", contentType: "text/plain" } });
    const wrongRows = await startFakeServer({ override: { status: 200, body: '{"data":[{"index":0,"embedding":[1]}]}' } });
    try {
      await assert.rejects(new DensewireClient({ baseURL: html.url }).embed("x"), { name: "DensewireHTTPError", status: 502, code: null, message: "<html>Bad Gateway</html> (1 attempt)", attempts: 1 });
      await assert.rejects(new DensewireClient({ baseURL: text.url }).embed("x"), { name: "DensewireError", category: "unsupported_media_type", field: "Content-Type" });
      await assert.rejects(new DensewireClient({ baseURL: wrongRows.url }).embed(["x", "y"]), { category: "shape_mismatch", field: "data" });
    } finally {
      await Promise.all([html.close(), text.close(), wrongRows.close()]);
    }
  });
});

describe("client on the golden bodies", () => {
  // a server answering each golden embeddings response case, as SPEC.md's headers say, at /<case id>/v1/embeddings
  const cases = loadGolden("tensors").filter((c) => "usage" in c);
  let url = "";
  const server = createServer((req, res) => {
    const id = decodeURIComponent(req.url!.split("/")[1]!);
    const c = cases.find((x) => x.id === id)!;
    const format = c["format"] === "json" ? "json" : (c["format"] as Format);
    const headers: Record<string, string> = { "Content-Type": MEDIA_TYPES[format], ...((c["headers"] as Record<string, string> | undefined) ?? {}) };
    req.resume();
    res.writeHead(200, headers);
    res.end("encoded_hex" in c ? Buffer.from(c["encoded_hex"] as string, "hex") : (c["encoded_text"] as string));
  });
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it("covers every format", () => {
    assert.deepEqual(new Set(cases.map((c) => c["format"])), new Set(["raw", "msgpack", "protobuf", "arrow", "json"]));
  });
  for (const c of cases) {
    it(c.id, async () => {
      const client = new DensewireClient({ baseURL: `${url}/${encodeURIComponent(c.id)}/v1` });
      const n = (c.shape as number[])[0]!;
      const e: Embeddings = await client.embed(Array.from({ length: n }, (_, i) => `t${i}`));
      assertTensor(e, c as GoldenCase);
      assert.equal(e.model, c["model"]);
      assert.deepEqual(e.usage, c["usage"]);
    });
  }
});

describe("decodeResponse", () => {
  it("decodes fetch Responses of any format", async () => {
    const t = makeTensor("float32", [1, 2], Float32Array.from([1, 2]));
    const r = new Response(encodeMsgpack(t) as Uint8Array<ArrayBuffer>, { headers: { "Content-Type": "application/x-msgpack" } });
    assert.deepEqual(Array.from((await decodeResponse(r)).data), [1, 2]);
    const bad = new Response(Uint8Array.from([0x93, 1, 2, 3]), { headers: { "Content-Type": "application/msgpack" } });
    await assert.rejects(decodeResponse(bad), (e: unknown) => e instanceof DensewireError && e.category === "malformed" && e.offset === 0);
    assertDensewireError(() => {
      throw new DensewireError("truncated", "x", { offset: 3 });
    }, { category: "truncated", offset: 3 });
    assert.deepEqual(new DensewireError("invalid_base64", "bad", { offset: 4, field: "data[1].embedding" }).toJSON(), {
      error: { message: "data[1].embedding: bad", type: "invalid_request_error", param: "data[1].embedding", code: "invalid_base64", offset: 4 },
    });
    assert.equal(fromHex("00").length, 1);
  });
});
