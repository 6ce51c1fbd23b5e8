/**
 * The /demo page in a real browser: Debian's Chromium, headless, driven by playwright-core (no browser
 * download: CHROMIUM_PATH, default /usr/bin/chromium; `apt-get install chromium` when missing, as
 * ci.sh does). The page is served by a real `densewire serve`: DENSEWIRE_SERVER_URL when set
 * (scripts/test.sh starts one for the language suites), else one started here from the repository's
 * .venv. On load, without a click, the page fetches both demo tables in all 7 formats, decodes them
 * with the library's table decoders (bundled into the page) and draws them (measuring a table again
 * once the server has built its compressions); the test checks that every format decoded to the same
 * data, that the map shows the points, that the results table has a row per format, and saves a
 * screenshot to typescript/test-output/demo.png. `?run=0` runs nothing; on a server still compressing
 * (`--table-compression max`) the rows are marked as such and kept out of the chart.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { DEMO_FORMATS, DEMO_TABLES, type DemoResult, Server, launchChromium, waitHealthy } from "./browser.js";
import { repoRoot } from "./helpers.js";

const FORMATS = DEMO_FORMATS;
const TABLES = DEMO_TABLES;
const DEMO_ROWS = 67_627;
type Result = DemoResult;

describe("the /demo page in headless Chromium", () => {
  let serverURL: string;
  let server: Server | undefined;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  let results: Result[];

  before(async () => {
    if (process.env.DENSEWIRE_SERVER_URL) {
      serverURL = process.env.DENSEWIRE_SERVER_URL.replace(/\/+$/, "");
      await waitHealthy(serverURL);
    } else {
      server = await Server.start(["--model", "hash:64"]);
      serverURL = server.url;
    }
    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    const response = await page.goto(`${serverURL}/demo/`);
    assert.equal(response?.status(), 200, `GET /demo/ answered ${response?.status()}`);
    await page.waitForFunction(() => (window as unknown as { densewireDemo?: { ready: boolean } }).densewireDemo?.ready === true, undefined, {
      timeout: 30_000,
    });
    // no click: the page runs every format by itself, and again for a table that was still warming
    await page.waitForFunction(
      (n) => {
        const d = (window as unknown as { densewireDemo: { running: boolean; results: { warming: boolean }[] } }).densewireDemo;
        return !d.running && d.results.length === n && d.results.every((r) => !r.warming);
      },
      TABLES.length * FORMATS.length,
      { timeout: 480_000, polling: 250 },
    );
    assert.deepEqual(pageErrors, []);
    results = (await page.evaluate(() => (window as unknown as { densewireDemo: { results: unknown } }).densewireDemo.results)) as Result[];
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("fetches and decodes every format of both tables without error", () => {
    assert.deepEqual(
      results.map((r) => `${r.table}/${r.format}`),
      TABLES.flatMap((t) => FORMATS.map((f) => `${t}/${f}`)),
    );
    for (const r of results) {
      assert.equal(r.ok, true, `${r.table}/${r.format}: ${r.error}`);
      assert.equal(r.rows, DEMO_ROWS, `${r.table}/${r.format} rows`);
      assert.equal(r.drawn, DEMO_ROWS, `${r.table}/${r.format}: every point falls on the map`);
    }
  });

  it("decodes identical data from every format (same digest of the decoded columns)", () => {
    for (const table of TABLES) {
      const digests = new Set(results.filter((r) => r.table === table).map((r) => r.digest));
      assert.equal(digests.size, 1, `${table}: ${results.filter((r) => r.table === table).map((r) => `${r.format}=${r.digest}`).join(" ")}`);
    }
    const [p64, p32] = TABLES.map((t) => results.find((r) => r.table === t)!);
    // the same rows: uuid and status identical, coordinates not (float32 is a rounding of float64)
    assert.equal(p64!.columnDigests.uuid, p32!.columnDigests.uuid);
    assert.equal(p64!.columnDigests.status, p32!.columnDigests.status);
    assert.notEqual(p64!.columnDigests.longitude, p32!.columnDigests.longitude);
    assert.notEqual(p64!.digest, p32!.digest);
  });

  it("measures bytes and times from Resource Timing for every format", () => {
    for (const r of results) {
      const what = `${r.table}/${r.format}`;
      assert.ok(r.decodedBodySize > 0, `${what} decodedBodySize ${r.decodedBodySize}`);
      assert.ok(r.encodedBodySize > 0 && r.encodedBodySize <= r.decodedBodySize, `${what} encodedBodySize ${r.encodedBodySize}`);
      assert.ok(r.transferSize >= r.encodedBodySize, `${what} transferSize ${r.transferSize} (no-store: not from cache)`);
      if (r.contentEncoding !== "identity") assert.ok(r.encodedBodySize < r.decodedBodySize, `${what} is ${r.contentEncoding}-coded`);
      for (const k of ["downloadMs", "decodeMs", "firstPaintMs"] as const) assert.ok(Number.isFinite(r[k]) && r[k] >= 0, `${what} ${k} ${r[k]}`);
      assert.ok(r.firstPaintMs >= r.decodeMs, `${what}: first paint includes the decode`);
    }
    // the columnar binary formats are smaller than JSON objects, uncompressed
    const size = (f: string) => results.find((r) => r.table === "points" && r.format === f)!.decodedBodySize;
    for (const f of ["msgpack", "protobuf", "arrow"]) assert.ok(size(f) < size("json") / 2, `${f} ${size(f)} vs json ${size("json")}`);
  });

  it("draws the points on the map and fills the results table and the chart without a click", async () => {
    // points are clustered around cities (a pixel is ~33 km): a few thousand pixels, both statuses
    const pixels = await page.evaluate(() =>
      (window as unknown as { densewireDemo: { pointPixels(): { status0: number; status1: number } } }).densewireDemo.pointPixels(),
    );
    assert.ok(pixels.status0 > 500 && pixels.status1 > 500, `too few pixels in the status colours: ${JSON.stringify(pixels)}`);
    const rows = await page.$$eval("#results tbody tr", (trs) => trs.map((tr) => `${(tr as HTMLElement).dataset.table}/${(tr as HTMLElement).dataset.format}`));
    assert.deepEqual(rows, TABLES.flatMap((t) => FORMATS.map((f) => `${t}/${f}`)));
    assert.equal(await page.locator("#results td.differs").count(), 0, "a digest differs or a format failed");
    assert.equal(await page.locator("#chart .bar-row:not(.bar-head)").count(), TABLES.length * FORMATS.length);
    assert.equal(await page.locator("#results tr.warming, #results tr.warming-head").count(), 0);
    const out = join(repoRoot(), "typescript", "test-output");
    mkdirSync(out, { recursive: true });
    await page.screenshot({ path: join(out, "demo.png"), fullPage: true });
    assert.ok(existsSync(join(out, "demo.png")));
  });
});

type DemoState = { densewireDemo?: { ready: boolean; running: boolean; autoRun: boolean; results: Result[]; tableStatus: Record<string, string> } };

describe("the /demo page's own start, in headless Chromium", () => {
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;

  before(async () => {
    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
  });

  after(async () => {
    await browser?.close();
  });

  it("runs nothing with ?run=0", async () => {
    const server = process.env.DENSEWIRE_SERVER_URL ? undefined : await Server.start(["--model", "hash:64", "--table-compression", "off"]);
    try {
      const url = (process.env.DENSEWIRE_SERVER_URL ?? server!.url).replace(/\/+$/, "");
      await page.goto(`${url}/demo/?run=0`);
      await page.waitForFunction(() => (window as unknown as DemoState).densewireDemo?.ready === true, undefined, { timeout: 30_000 });
      // with the page's own start, running is set before ready; here nothing started
      const state = await page.evaluate(() => {
        const d = (window as unknown as DemoState).densewireDemo!;
        return { running: d.running, autoRun: d.autoRun, results: d.results.length };
      });
      assert.deepEqual(state, { running: false, autoRun: false, results: 0 });
      assert.equal(await page.locator("#results tbody tr").count(), 0);
      assert.match((await page.locator("#caption").textContent()) ?? "", /run=0/);
    } finally {
      await server?.stop();
    }
  });

  it("says which rows were measured while the server was still compressing, and keeps them out of the chart", async () => {
    // max levels: the compressions take minutes on 2 cores, so both tables stay `warming` meanwhile
    const server = await Server.start(["--model", "hash:64", "--table-compression", "max"]);
    try {
      await page.goto(`${server.url}/demo/`);
      await page.waitForFunction(
        (n) => {
          const d = (window as unknown as DemoState).densewireDemo;
          return d?.ready === true && !d.running && d.results.length === n;
        },
        TABLES.length * FORMATS.length,
        { timeout: 120_000, polling: 250 },
      );
      const { results, status } = await page.evaluate(() => {
        const d = (window as unknown as DemoState).densewireDemo!;
        return { results: d.results, status: d.tableStatus };
      });
      const warming = results.filter((r) => r.warming);
      assert.ok(warming.length > 0, `no row measured while warming: ${JSON.stringify(status)}`);
      for (const r of results) assert.equal(r.ok, true, `${r.table}/${r.format}: ${r.error}`);
      // each warming row is marked next to it, under a line that says why; the chart has only finished rows
      assert.equal(await page.locator("#results tr.warming").count(), warming.length);
      for (const r of warming) {
        const state = await page.locator(`#results tr.warming[data-table="${r.table}"][data-format="${r.format}"] td.state`).textContent();
        assert.match(state ?? "", /compressions still being built/);
      }
      assert.match((await page.locator("#results tr.warming-head").textContent()) ?? "", /still building the compressed bodies/);
      assert.equal(await page.locator("#chart .bar-row:not(.bar-head)").count(), results.length - warming.length);
      // the finished rows come first: no warming row above a finished one
      const order = await page.$$eval("#results tbody tr[data-table]", (trs) => trs.map((tr) => tr.classList.contains("warming")));
      assert.deepEqual(order, [...order].sort((a, b) => Number(a) - Number(b)));
      const out = join(repoRoot(), "typescript", "test-output");
      mkdirSync(out, { recursive: true });
      await page.screenshot({ path: join(out, "demo-warming.png"), fullPage: true });
    } finally {
      await server.stop();
    }
  });
});
