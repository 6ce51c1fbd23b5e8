/**
 * Retries of both clients against a fault-injecting node:http server in front of the in-process fake
 * servers (429 and 503 with Retry-After, a connection closed before any answer, a 400), counting the
 * attempts; the backoff and Retry-After helpers; and, when DENSEWIRE_OVERLOAD_URL is set (scripts/test.sh
 * starts `densewire serve --max-concurrent-requests 1` there), the real overloaded server.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  DEFAULT_RETRY,
  DensewireClient,
  DensewireConnectionError,
  DensewireHTTPError,
  RateLimitError,
  TablesClient,
  backoffMs,
  parseRetryAfter,
  retryPolicy,
  retryWait,
} from "../src/index.js";
import { type FakeServer, startFakeServer } from "./server.js";
import { type FakeTablesServer, pointsCases, startTablesServer } from "./tables-server.js";

type Fault = "429" | "503" | "400" | "close" | "ok";

interface FaultServer {
  url: string;
  /** The faults of the next requests, in order; a request past them is passed on. */
  faults: Fault[];
  retryAfter: string | undefined;
  count: number;
  arrivals: number[];
  close(): Promise<void>;
}

/** A server that answers each request with its fault, or passes it on to `target` ("ok", or no fault left). */
async function startFaultServer(target: string): Promise<FaultServer> {
  const state: FaultServer = { url: "", faults: [], retryAfter: "0", count: 0, arrivals: [], close: async () => undefined };
  const handle = async (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const fault = state.faults[state.count++] ?? "ok";
    state.arrivals.push(performance.now());
    if (fault === "close") {
      req.socket.destroy(); // the request was read; no byte of an answer is sent
      return;
    }
    if (fault !== "ok") {
      const code = { "429": "rate_limited", "503": "unavailable", "400": "malformed" }[fault];
      const headers: Record<string, string> = { "Content-Type": "application/json" };
      if (state.retryAfter !== undefined) headers["Retry-After"] = state.retryAfter;
      res.writeHead(Number(fault), headers);
      res.end(JSON.stringify({ error: { message: `injected ${fault}`, type: "invalid_request_error", param: null, code } }));
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "connection") headers[k] = v;
    const init: RequestInit = { method: req.method ?? "GET", headers };
    if (body.length > 0) init.body = new Uint8Array(body);
    const answer = await fetch(new URL(target).origin + (req.url ?? "/"), init);
    const out = Buffer.from(await answer.arrayBuffer()); // fetch undid any Content-Encoding
    const passed: Record<string, string> = {};
    answer.headers.forEach((v, k) => {
      if (!["content-encoding", "content-length", "transfer-encoding", "connection"].includes(k)) passed[k] = v;
    });
    res.writeHead(answer.status, passed);
    res.end(out);
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      handle(req, res, Buffer.concat(chunks)).catch((e: unknown) => {
        res.writeHead(500);
        res.end(String(e));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

const fast = { backoffBaseMs: 1, backoffMaxMs: 5 };

describe("embeddings client retries", () => {
  let fake: FakeServer;
  let faults: FaultServer;
  before(async () => {
    fake = await startFakeServer();
    faults = await startFaultServer(fake.url);
  });
  after(async () => {
    await faults.close();
    await fake.close();
  });
  const arm = (list: Fault[], retryAfter: string | undefined = "0") => {
    faults.faults = list;
    faults.retryAfter = retryAfter;
    faults.count = 0;
    faults.arrivals = [];
  };

  for (const list of [["429", "429"], ["503"], ["close", "close"], ["429", "close", "503"]] as Fault[][]) {
    it(`recovers from ${list.join(", ")}`, async () => {
      arm(list);
      const client = new DensewireClient({ baseURL: `${faults.url}/v1`, maxRetries: 3, ...fast });
      const e = await client.embed(["a", "b", "c"]);
      assert.deepEqual(e.shape, [3, 384]);
      assert.equal(faults.count, list.length + 1);
    });
  }

  it("gives up after maxRetries with a RateLimitError saying how many attempts", async () => {
    arm(["429", "429", "429", "429"]);
    const client = new DensewireClient({ baseURL: `${faults.url}/v1`, ...fast }); // default: 2 retries
    await assert.rejects(client.embed("x"), (e: unknown) => {
      assert.ok(e instanceof RateLimitError && e instanceof DensewireHTTPError, String(e));
      assert.equal(e.status, 429);
      assert.equal(e.attempts, 3);
      assert.match(e.message, /\(3 attempts\)$/);
      return true;
    });
    assert.equal(faults.count, 3);
  });

  it("gives up on a 503 and on a closed connection with the attempts", async () => {
    arm(["503", "503"]);
    const client = new DensewireClient({ baseURL: `${faults.url}/v1`, maxRetries: 1, ...fast });
    await assert.rejects(client.embed("x"), (e: unknown) => e instanceof DensewireHTTPError && !(e instanceof RateLimitError) && e.status === 503 && e.attempts === 2);
    arm(["close", "close", "close"]);
    await assert.rejects(client.embed("x"), (e: unknown) => e instanceof DensewireConnectionError && e.attempts === 2 && /\(2 attempts\)$/.test(e.message));
    assert.equal(faults.count, 2);
  });

  it("never retries a 400, nor a 422 of the server", async () => {
    arm(["400"]);
    const client = new DensewireClient({ baseURL: `${faults.url}/v1`, maxRetries: 5, ...fast });
    await assert.rejects(client.embed("x"), (e: unknown) => e instanceof DensewireHTTPError && e.status === 400 && e.attempts === 1 && /\(1 attempt\)$/.test(e.message));
    assert.equal(faults.count, 1);
    arm([]);
    await assert.rejects(client.embed(["a", ""]), (e: unknown) => e instanceof DensewireHTTPError && e.status === 422 && e.attempts === 1);
    assert.equal(faults.count, 1);
  });

  it("maxRetries 0 (per client or per call) sends once", async () => {
    arm(["429"]);
    await assert.rejects(new DensewireClient({ baseURL: `${faults.url}/v1`, maxRetries: 0 }).embed("x"), RateLimitError);
    arm(["503"]);
    await assert.rejects(new DensewireClient({ baseURL: `${faults.url}/v1`, ...fast }).embed("x", { maxRetries: 0 }), (e: unknown) => e instanceof DensewireHTTPError && e.status === 503);
    assert.equal(faults.count, 1);
  });

  it("waits at least the Retry-After the server asked for", async () => {
    arm(["503"], "1");
    await new DensewireClient({ baseURL: `${faults.url}/v1`, ...fast }).embed("x");
    assert.equal(faults.arrivals.length, 2);
    assert.ok(faults.arrivals[1]! - faults.arrivals[0]! >= 990, `retried after ${faults.arrivals[1]! - faults.arrivals[0]!} ms`);
  });

  it("a Retry-After over a minute is not waited for: the error comes at once, carrying it", async () => {
    arm(["429", "429"], "61");
    await assert.rejects(new DensewireClient({ baseURL: `${faults.url}/v1` }).embed("x"), (e: unknown) => {
      assert.ok(e instanceof RateLimitError, String(e));
      assert.equal(e.attempts, 1);
      assert.equal(e.retryAfterMs, 61_000);
      return true;
    });
    assert.equal(faults.count, 1);
  });

  it("an HTTP-date Retry-After in the past retries at once", async () => {
    arm(["429"], new Date(Date.now() - 60_000).toUTCString());
    const e = await new DensewireClient({ baseURL: `${faults.url}/v1`, ...fast }).embed("x");
    assert.deepEqual(e.shape, [1, 384]);
    assert.equal(faults.count, 2);
  });

  it("an abort during the backoff rejects at once with the signal's reason", async () => {
    arm(["429"], "30"); // under a minute: waited for
    const controller = new AbortController();
    const pending = new DensewireClient({ baseURL: `${faults.url}/v1` }).embed("x", { signal: controller.signal });
    while (faults.count === 0) await new Promise((r) => setTimeout(r, 1));
    await new Promise((r) => setTimeout(r, 20)); // the 429 has come back: the client is waiting
    controller.abort(new Error("caller gave up"));
    await assert.rejects(pending, /caller gave up/);
    assert.equal(faults.count, 1);
  });

  it("embedMany retries each batch", async () => {
    arm(["429", "503", "close"]);
    const client = new DensewireClient({ baseURL: `${faults.url}/v1`, maxRetries: 3, ...fast });
    const e = await client.embedMany(["a", "b", "c", "d"], { batchSize: 2, concurrency: 1 });
    assert.deepEqual(e.shape, [4, 384]);
    assert.equal(faults.count, 5);
  });
});

describe("tables client retries", () => {
  let tables: FakeTablesServer;
  let faults: FaultServer;
  before(async () => {
    tables = await startTablesServer(pointsCases());
    faults = await startFaultServer(tables.url);
  });
  after(async () => {
    await faults.close();
    await tables.close();
  });

  it("retries listTables and getTable, never a 400", async () => {
    faults.faults = ["503", "429", "ok", "close", "503", "ok", "400"];
    const client = new TablesClient({ baseURL: `${faults.url}/v1`, ...fast });
    const list = await client.listTables();
    assert.equal(faults.count, 3);
    const r = await client.getTable(list[0]!.name);
    assert.equal(r.table?.rows, list[0]!.rows);
    assert.equal(faults.count, 6);
    await assert.rejects(client.getTable(list[0]!.name), (e: unknown) => e instanceof DensewireHTTPError && e.status === 400 && e.attempts === 1);
    assert.equal(faults.count, 7);
    faults.faults.push("429", "429");
    await assert.rejects(client.getTable(list[0]!.name, { maxRetries: 1 }), (e: unknown) => e instanceof RateLimitError && e.attempts === 2);
  });
});

describe("retry helpers", () => {
  it("parses Retry-After as delay-seconds or an HTTP date (SPEC.md 18.2)", () => {
    const now = Date.UTC(2026, 10, 25, 12, 0, 0);
    assert.equal(parseRetryAfter("2", now), 2000);
    assert.equal(parseRetryAfter(" 0 ", now), 0);
    assert.equal(parseRetryAfter("86400", now), 86_400_000); // not clamped: the client gives up on it instead
    assert.equal(parseRetryAfter("Wed, 25 Nov 2026 12:00:10 GMT", now), 10_000);
    assert.equal(parseRetryAfter("Wed, 25 Nov 2026 11:59:00 GMT", now), 0);
    for (const bad of [null, undefined, "", "-1", "soon", "1e3", "1.5", "+3", "2026-11-25"]) assert.equal(parseRetryAfter(bad, now), undefined, String(bad));
  });

  it("adds the jitter on top of Retry-After and gives up past a minute", () => {
    const policy = retryPolicy({});
    const waits = Array.from({ length: 200 }, () => retryWait(1, { status: 429, retryAfter: "3" }, policy)!);
    assert.ok(waits.every((w) => w >= 3 && w < 3.5), "in [3, 3.5)");
    assert.ok(new Set(waits).size > 100, "spread, not max(jitter, Retry-After)");
    assert.equal(retryWait(1, { status: 429, retryAfter: "61" }, policy), undefined);
    assert.equal(retryWait(1, { status: 500 }, policy), undefined);
    assert.equal(retryWait(3, { status: 0 }, policy), undefined);
    assert.equal(retryWait(2, { status: 0 }, retryPolicy({ random: () => 0.5 })), 0.5);
  });

  it("backs off with full jitter under a doubling bound", () => {
    const policy = retryPolicy({ maxRetries: 2, backoffBaseMs: 100, backoffMaxMs: 1000 });
    for (const [n, bound] of [[1, 100], [2, 200], [4, 800], [5, 1000], [80, 1000]] as const) {
      let top = 0;
      for (let i = 0; i < 2000; i++) {
        const d = backoffMs(n, policy);
        assert.ok(d >= 0 && d < bound, `retry ${n}: ${d} outside [0, ${bound})`);
        top = Math.max(top, d);
      }
      assert.ok(top >= bound / 2, `retry ${n}: the largest of 2000 waits is ${top}, bound ${bound}`);
    }
    assert.deepEqual({ ...DEFAULT_RETRY }, { maxRetries: 2, backoffBaseMs: 500, backoffMaxMs: 8000, random: Math.random });
    assert.throws(() => new DensewireClient({ maxRetries: -1 }), RangeError);
    assert.throws(() => new TablesClient({ backoffMaxMs: Number.NaN }), RangeError);
  });
});

/** The overloadable server scripts/test.sh starts (DENSEWIRE_OVERLOAD_URL), and the skip reason without
 * it; under CI its absence is a failing test (registered in the calling describe), never a skip. */
function overloadServer(): { base: string | undefined; skip: string | false } | undefined {
  const base = process.env["DENSEWIRE_OVERLOAD_URL"];
  if (base === undefined && process.env["CI"] === "true") {
    it("needs DENSEWIRE_OVERLOAD_URL under CI", () => {
      assert.fail("DENSEWIRE_OVERLOAD_URL is not set, and CI=true: scripts/test.sh must start densewire serve --max-concurrent-requests 1");
    });
    return undefined;
  }
  const skip = base === undefined ? "DENSEWIRE_OVERLOAD_URL is not set (scripts/test.sh starts densewire serve --max-concurrent-requests 1 there)" : false;
  return { base, skip };
}

describe("against a real overloaded server (DENSEWIRE_OVERLOAD_URL)", () => {
  const server = overloadServer();
  if (server === undefined) return;
  const { base, skip } = server;
  const burst = (maxRetries: number, tag: string) => {
    const client = new DensewireClient({ baseURL: `${base}/v1`, maxRetries, ...(process.env["DENSEWIRE_API_KEY"] ? { apiKey: process.env["DENSEWIRE_API_KEY"] } : {}) });
    return Promise.allSettled(
      Array.from({ length: 16 }, (_, i) => client.embed(Array.from({ length: 16 }, (_, j) => `${tag} request ${i} text ${j}: a sentence about retries`))),
    );
  };

  it("16 concurrent requests of 16 texts all succeed with 8 retries; without retries one is a 429", { skip }, async () => {
    const run = `${process.pid}-${Date.now()}`;
    const retried = await burst(8, `retried ${run}`);
    for (const [i, r] of retried.entries()) {
      assert.equal(r.status, "fulfilled", `request ${i} with 8 retries: ${r.status === "rejected" ? String(r.reason) : ""}`);
      if (r.status === "fulfilled") assert.equal(r.value.shape[0], 16);
    }
    const unretried = await burst(0, `unretried ${run}`);
    let limited = 0;
    for (const [i, r] of unretried.entries()) {
      if (r.status === "fulfilled") continue;
      assert.ok(r.reason instanceof RateLimitError, `request ${i} without retries: ${String(r.reason)}, want success or a 429`);
      limited++;
    }
    assert.ok(limited > 0, "16 concurrent requests without retries: none was rate limited (429)");
  });
});

describe("twelve clients against one slot (DENSEWIRE_OVERLOAD_URL), the default schedule", () => {
  const server = overloadServer();
  if (server === undefined) return;
  const { base, skip } = server;
  const apiKey = process.env["DENSEWIRE_API_KEY"];
  const rejections = async (): Promise<number> => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith('densewire_admission_rejections_total{reason="full"}'));
    return line === undefined ? 0 : Number(line.split(" ").pop());
  };

  // Twelve clients, each a new DensewireClient with the default 2 retries, send one request of 16 texts
  // of the built-in model (about half a second on two busy cores) at once: every one succeeds, because
  // the server tells those it turns away to come back one after another (SPEC.md 18.3) and the clients
  // add their jitter on top (18.2).
  it("every call succeeds with the default 2 retries", { skip }, async () => {
    const run = `${process.pid}-${Date.now()}`;
    const texts = (tag: string) => Array.from({ length: 16 }, (_, j) => `${tag} ${run} text ${j}: a sentence of a dozen words about retrying an overloaded server`);
    const options = { baseURL: `${base}/v1`, ...(apiKey ? { apiKey } : {}) };
    const warm = new DensewireClient(options); // the model warm, and the server's estimate of such a request
    for (let k = 0; k < 3; k++) assert.deepEqual((await warm.embed(texts(`warm ${k}`))).shape, [16, 384]);
    const before = await rejections();
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => new DensewireClient(options).embed(texts(`client ${i}`))));
    const failed = results.flatMap((r, i) => (r.status === "rejected" ? [`${i}: ${String(r.reason)}`] : []));
    assert.deepEqual(failed, [], `${failed.length} of 12 calls failed`);
    for (const r of results) if (r.status === "fulfilled") assert.deepEqual(r.value.shape, [16, 384]);
    assert.ok((await rejections()) > before, "no request was turned away: the twelve did not overlap, nothing was tested");
  });
});
