/**
 * The /demo page in a real browser: Debian's Chromium, headless, driven by playwright-core (no browser
 * download: CHROMIUM_PATH, default /usr/bin/chromium; `apt-get install chromium` when missing, as
 * ci.sh does). The page is served by a real `densewire serve`: DENSEWIRE_SERVER_URL when set
 * (scripts/test.sh starts one for the language suites), else one started here from the repository's
 * .venv. The page fetches both demo tables in all 7 formats, decodes them with the library's table
 * decoders (bundled into the page) and draws them; the test checks that every format decoded to the
 * same data, that the map shows the points, that the results table has a row per format, and saves a
 * screenshot to typescript/test-output/demo.png.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, type Page, chromium } from "playwright-core";
import { repoRoot } from "./helpers.js";

const FORMATS = ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"];
const TABLES = ["points", "points_f32"];
const DEMO_ROWS = 67_627;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

interface Result {
  table: string;
  format: string;
  ok: boolean;
  error?: string;
  rows: number;
  contentEncoding: string;
  transferSize: number;
  encodedBodySize: number;
  decodedBodySize: number;
  downloadMs: number;
  decodeMs: number;
  firstPaintMs: number;
  digest: string;
  columnDigests: Record<string, string>;
  drawn: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function waitHealthy(url: string, proc?: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last: unknown;
  while (Date.now() < deadline) {
    if (proc && proc.exitCode !== null) throw new Error(`densewire serve exited with ${proc.exitCode}`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) return;
      last = r.status;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`densewire serve at ${url} not healthy after 60 s: ${String(last)}`);
}

describe("the /demo page in headless Chromium", () => {
  let serverURL: string;
  let server: ChildProcess | undefined;
  let serverLog = "";
  let context: BrowserContext;
  let profile: string;
  let page: Page;
  let results: Result[];

  before(async () => {
    assert.ok(
      existsSync(CHROMIUM),
      `Chromium not found at ${CHROMIUM}: install Debian's (apt-get install -y chromium) or set CHROMIUM_PATH; typescript/ci.sh installs it`,
    );
    if (process.env.DENSEWIRE_SERVER_URL) {
      serverURL = process.env.DENSEWIRE_SERVER_URL.replace(/\/+$/, "");
    } else {
      const exe = join(repoRoot(), ".venv", "bin", "densewire");
      assert.ok(existsSync(exe), `${exe} not found: run scripts/setup-python.sh, or set DENSEWIRE_SERVER_URL to a running densewire serve`);
      const port = await freePort();
      server = spawn(exe, ["serve", "--model", "hash:64", "--host", "127.0.0.1", "--port", String(port)], { stdio: ["ignore", "pipe", "pipe"] });
      server.stdout!.on("data", (d: Buffer) => (serverLog += d.toString()));
      server.stderr!.on("data", (d: Buffer) => (serverLog += d.toString()));
      serverURL = `http://127.0.0.1:${port}`;
    }
    try {
      await waitHealthy(serverURL, server);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${serverLog.slice(-3000)}`);
    }
    profile = mkdtempSync(join(tmpdir(), "densewire-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 1400 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    const response = await page.goto(`${serverURL}/demo`);
    assert.equal(response?.status(), 200, `GET /demo answered ${response?.status()}`);
    await page.waitForFunction(() => (window as unknown as { densewireDemo?: { ready: boolean } }).densewireDemo?.ready === true, undefined, {
      timeout: 30_000,
    });
    assert.deepEqual(pageErrors, []);
    results = (await page.evaluate(() =>
      (window as unknown as { densewireDemo: { runAll(): Promise<unknown> } }).densewireDemo.runAll(),
    )) as Result[];
  });

  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    if (server) {
      server.kill("SIGTERM");
      await new Promise((r) => (server!.exitCode !== null ? r(undefined) : server!.once("exit", r)));
    }
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

  it("draws the points on the map and lists every format in the results table and the chart", async () => {
    // points are clustered around cities (a pixel is ~33 km): a few thousand pixels, both statuses
    const pixels = await page.evaluate(() =>
      (window as unknown as { densewireDemo: { pointPixels(): { status0: number; status1: number } } }).densewireDemo.pointPixels(),
    );
    assert.ok(pixels.status0 > 500 && pixels.status1 > 500, `too few pixels in the status colours: ${JSON.stringify(pixels)}`);
    const rows = await page.$$eval("#results tbody tr", (trs) => trs.map((tr) => `${(tr as HTMLElement).dataset.table}/${(tr as HTMLElement).dataset.format}`));
    assert.deepEqual(rows, TABLES.flatMap((t) => FORMATS.map((f) => `${t}/${f}`)));
    assert.equal(await page.locator("#results td.differs").count(), 0, "a digest differs or a format failed");
    assert.equal(await page.locator("#chart .bar-row:not(.bar-head)").count(), TABLES.length * FORMATS.length);
    const out = join(repoRoot(), "typescript", "test-output");
    mkdirSync(out, { recursive: true });
    await page.screenshot({ path: join(out, "demo.png"), fullPage: true });
    assert.ok(existsSync(join(out, "demo.png")));
  });
});
