/**
 * The /demo page on one origin loading the tables from another, in headless Chromium: what a web
 * application does when its data comes from a separate `densewire serve`. The server has an API key,
 * `--public-tables` and `--cors-origins http://localhost:PORT`; the page is opened at
 * http://localhost:PORT/demo/?api=http://127.0.0.1:PORT (same server, another origin for the
 * browser). Every format must decode as it does on the same origin, the Densewire-* headers and
 * ETag must be readable by the page, and Resource Timing must still report sizes (Timing-Allow-Origin).
 * The same page opened from an origin the server does not list must be refused by the browser.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { DEMO_FORMATS, DEMO_TABLES, type DemoResult, Server, freePort, launchChromium } from "./browser.js";

const FORMATS = DEMO_FORMATS;
const TABLES = DEMO_TABLES;
const ROWS = 2_000;
type Result = DemoResult;

type DemoWindow = {
  densewireDemo: { ready: boolean; runAll(): Promise<Result[]>; run(t: string, f: string): Promise<Result> };
};

describe("the /demo page loading its tables from another origin (CORS) in headless Chromium", () => {
  let server: Server;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  let pageOrigin: string;

  async function open(url: string): Promise<void> {
    const response = await page.goto(url);
    assert.equal(response?.status(), 200, `GET ${url} answered ${response?.status()}`);
    await page.waitForFunction(() => (window as unknown as Partial<DemoWindow>).densewireDemo?.ready === true, undefined, { timeout: 30_000 });
  }

  before(async () => {
    const port = await freePort();
    pageOrigin = `http://localhost:${port}`;
    server = await Server.start(
      [
        "--model", "hash:8", "--no-demo-tables", "--table-compression", "fast", "--api-key", "k1", "--public-tables",
        "--table", `points=demo:rows=${ROWS}`, "--table", `points_f32=demo:rows=${ROWS},coordinates=float32`,
        "--cors-origins", pageOrigin,
      ],
      port,
    );
    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("decodes every format of both tables across origins, with sizes from Resource Timing", async () => {
    await open(`${pageOrigin}/demo/?run=0&api=${encodeURIComponent(server.url)}`);
    assert.equal(await page.evaluate(() => location.origin), pageOrigin);
    const results = await page.evaluate(() => (window as unknown as DemoWindow).densewireDemo.runAll());
    assert.deepEqual(
      results.map((r) => `${r.table}/${r.format}`),
      TABLES.flatMap((t) => FORMATS.map((f) => `${t}/${f}`)),
    );
    for (const r of results) {
      const what = `${r.table}/${r.format}`;
      assert.equal(r.ok, true, `${what}: ${r.error}`);
      assert.equal(r.rows, ROWS, what);
      assert.equal(r.drawn, ROWS, what);
      assert.ok(r.encodedBodySize > 0, `${what}: Resource Timing hides the size (no Timing-Allow-Origin?)`);
    }
    for (const t of TABLES) {
      const digests = new Set(results.filter((r) => r.table === t).map((r) => r.digest));
      assert.equal(digests.size, 1, `${t}: the formats decoded to different data`);
    }
  });

  it("lets the page read the Densewire-* headers and ETag, and revalidate to a 304", async () => {
    const seen = await page.evaluate(async (api) => {
      const url = `${api}/v1/tables/points?format=protobuf`;
      const r = await fetch(url, { cache: "no-store" });
      await r.arrayBuffer();
      const etag = r.headers.get("etag");
      const again = await fetch(url, { headers: { "If-None-Match": etag ?? "" } });
      return { columns: r.headers.get("densewire-columns"), rows: r.headers.get("densewire-rows"), etag, revalidated: again.status };
    }, server.url);
    assert.match(seen.columns ?? "", /longitude=float64/);
    assert.equal(seen.rows, String(ROWS));
    assert.match(seen.etag ?? "", /^"[^"]+"$/);
    assert.equal(seen.revalidated, 304);
  });

  it("is refused by the browser for an origin the server does not list", async () => {
    // the page from 127.0.0.1, the tables from localhost: the server allows only the localhost origin
    await open(`${server.url}/demo/?run=0&api=${encodeURIComponent(pageOrigin)}`);
    const r = await page.evaluate(() => (window as unknown as DemoWindow).densewireDemo.run("points", "protobuf"));
    assert.equal(r.ok, false);
    assert.match(r.error ?? "", /TypeError: Failed to fetch/);
  });
});
