/**
 * Shared pieces of the browser tests: Debian's Chromium driven by playwright-core (no browser
 * download: CHROMIUM_PATH, default /usr/bin/chromium; typescript/ci.sh installs it when missing),
 * and a `densewire serve` started from the repository's .venv.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { repoRoot } from "./helpers.js";

/** The formats and tables the /demo page loads, in its order. */
export const DEMO_FORMATS = ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"];
export const DEMO_TABLES = ["points", "points_f32"];

/** One measurement of the /demo page (`window.densewireDemo.results`), the fields the tests read. */
export interface DemoResult {
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
  warming: boolean;
}

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
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

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function waitHealthy(url: string, proc?: ChildProcess): Promise<void> {
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

/** A `densewire serve` of this repository on 127.0.0.1 and a free port, healthy when returned. */
export class Server {
  private log = "";
  private constructor(
    readonly url: string,
    readonly port: number,
    private readonly proc: ChildProcess,
  ) {
    proc.stdout!.on("data", (d: Buffer) => (this.log += d.toString()));
    proc.stderr!.on("data", (d: Buffer) => (this.log += d.toString()));
  }

  static async start(args: string[], port?: number): Promise<Server> {
    const exe = join(repoRoot(), ".venv", "bin", "densewire");
    assert.ok(existsSync(exe), `${exe} not found: run scripts/setup-python.sh, or set DENSEWIRE_SERVER_URL to a running densewire serve`);
    port ??= await freePort();
    const proc = spawn(exe, ["serve", "--host", "127.0.0.1", "--port", String(port), ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const server = new Server(`http://127.0.0.1:${port}`, port, proc);
    try {
      await waitHealthy(server.url, proc);
    } catch (e) {
      proc.kill("SIGTERM");
      throw new Error(`${(e as Error).message}\n${server.log.slice(-3000)}`);
    }
    return server;
  }

  async stop(): Promise<void> {
    this.proc.kill("SIGTERM");
    await new Promise((r) => (this.proc.exitCode !== null ? r(undefined) : this.proc.once("exit", r)));
  }
}

/** Headless Chromium with a throw-away profile; `close()` removes the profile. */
export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  assert.ok(
    existsSync(CHROMIUM),
    `Chromium not found at ${CHROMIUM}: install Debian's (apt-get install -y chromium) or set CHROMIUM_PATH; typescript/ci.sh installs it`,
  );
  const profile = mkdtempSync(join(tmpdir(), "densewire-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 1400 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
