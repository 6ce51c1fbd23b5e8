#!/usr/bin/env node
/**
 * bench/tables: sizes and decode times of the published map case (67,627 points) for the row
 * baselines and densewire's table formats, in Node and in headless Chromium. run.sh calls this after
 * bodies.py wrote the densewire bodies into OUTDIR/densewire.
 *
 *   node --expose-gc bench/tables/bench.mjs OUTDIR [--warmup N] [--iterations N] [--rounds N]
 *
 * Writes OUTDIR/results.json and OUTDIR/report.md (also printed).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync, createReadStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve, extname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..");
const tsRequire = createRequire(join(repo, "typescript", "package.json"));
const esbuild = tsRequire("esbuild");
const { chromium } = tsRequire("playwright-core");

const args = process.argv.slice(2);
const dir = resolve(args[0] ?? mkdtempSync(join(tmpdir(), "densewire-bench-tables-")));
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const opts = { warmup: opt("warmup", 5), iterations: opt("iterations", 10), rounds: opt("rounds", 3) };
const python = process.env.PYTHON ?? join(repo, ".venv", "bin", "python");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

// ---- bundle the shared cases for Node and for the page ----------------------------------------
const common = { bundle: true, target: ["es2022"], logLevel: "warning", nodePaths: [join(repo, "typescript", "node_modules")], absWorkingDir: repo };
await esbuild.build({ ...common, entryPoints: [join(here, "node.ts")], outfile: join(dir, "node-bench.mjs"), platform: "node", format: "esm",
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" } });
mkdirSync(join(dir, "www"), { recursive: true });
await esbuild.build({ ...common, entryPoints: [join(here, "browser.ts")], outfile: join(dir, "www", "bench.js"), platform: "browser", format: "esm", minify: true });
writeFileSync(join(dir, "www", "index.html"), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>bench/tables</title><script type="module" src="/www/bench.js"></script>');

const node = await import(pathToFileURL(join(dir, "node-bench.mjs")).href);
const paths = await node.makeBaselines(dir);

// ---- sizes -------------------------------------------------------------------------------------
console.error("sizes: gzip -6/-9, brotli 11, zstd 19 (Python)");
const sizes = JSON.parse(execFileSync(python, [join(here, "sizes.py"), dir], { maxBuffer: 1 << 26 }).toString());
const sizeOf = (key) => sizes[paths[key]];

// ---- Node --------------------------------------------------------------------------------------
console.error(`node: ${JSON.stringify(opts)}`);
const nodeStats = await node.nodeBench(dir, opts);

// ---- Chromium ----------------------------------------------------------------------------------
const TYPES = { ".js": "text/javascript", ".html": "text/html", ".json": "application/json" };
const server = createServer((req, res) => {
  const file = join(dir, decodeURIComponent(new URL(req.url, "http://x").pathname));
  if (!file.startsWith(dir) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  // cross-origin isolated: performance.now() at 5 us resolution instead of 100 us
  res.writeHead(200, {
    "Content-Type": TYPES[extname(file)] ?? "application/octet-stream",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cache-Control": "no-store",
  });
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const profile = mkdtempSync(join(tmpdir(), "densewire-bench-chromium-"));
let browserResult;
let chromiumVersion;
try {
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  chromiumVersion = context.browser()?.version() ?? execFileSync(CHROMIUM, ["--version"]).toString().trim();
  const page = context.pages()[0] ?? (await context.newPage());
  page.on("console", (m) => console.error(`chromium: ${m.text()}`));
  page.on("pageerror", (e) => console.error(`chromium error: ${e}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/www/index.html`);
  await page.waitForFunction(() => typeof window.benchRun === "function");
  console.error("chromium: running");
  page.setDefaultTimeout(0);
  browserResult = await page.evaluate((o) => window.benchRun(o), opts);
  await context.close();
} finally {
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
const chromeStats = browserResult.stats;

// ---- checks: every decoder produced the same data as densewire's Protobuf of its table ---------
const ref = {
  points: nodeStats.find((s) => s.id === "densewire protobuf").check,
  points_f32: nodeStats.find((s) => s.id === "densewire protobuf f32").check,
};
const problems = [];
for (const [where, stats] of [["node", nodeStats], ["chromium", chromeStats]]) {
  for (const s of stats) {
    const c = node.CASES.find((x) => x.id === s.id);
    const want = JSON.stringify(ref[c.table]);
    if (JSON.stringify(s.check) !== want) problems.push(`${where} ${s.id}: ${JSON.stringify(s.check)} != ${want}`);
  }
}
if (problems.length) {
  console.error(problems.join("\n"));
  process.exitCode = 1;
}

// ---- report ------------------------------------------------------------------------------------
const MB = (n) => (n / 1e6).toFixed(3);
const pct = (a, b) => `${((100 * a) / b).toFixed(1)} %`;
const SIZE_ROWS = [
  ["points.json-objects", "JSON objects (row baseline)"],
  ["points.json-compact", "compact JSON, arrays (row baseline)"],
  ["points.msgpack-rows", "MessagePack rows, @msgpack/msgpack (row baseline)"],
  ["points.protobuf-rows", "Protobuf rows, published schema, double (row baseline)"],
  ["points_f32.protobuf-rows", "Protobuf rows, float coordinates"],
  ["points.json", "densewire JSON objects"],
  ["points.json-rows", "densewire JSON rows"],
  ["points.json-columns", "densewire JSON columns"],
  ["points.csv", "densewire CSV"],
  ["points.msgpack", "densewire columnar MessagePack"],
  ["points.protobuf", "densewire columnar Protobuf (byte-stream-split)"],
  ["points.arrow", "densewire Arrow"],
  ["points_f32.json-columns", "densewire JSON columns, float32 coordinates"],
  ["points_f32.csv", "densewire CSV, float32 coordinates"],
  ["points_f32.msgpack", "densewire columnar MessagePack, float32 coordinates"],
  ["points_f32.protobuf", "densewire columnar Protobuf, float32 coordinates"],
  ["points_f32.arrow", "densewire Arrow, float32 coordinates"],
];
const base = sizeOf("points.protobuf-rows");
const codings = ["raw", "gzip6", "gzip9", "br11", "zstd19"];
let md = "";
md += `### Sizes (MB = 10^6 bytes; % = of row-oriented Protobuf (double) with the same coding)\n\n`;
md += `| body | raw | gzip -6 | gzip -9 | brotli 11 | zstd 19 |\n|---|---:|---:|---:|---:|---:|\n`;
for (const [key, label] of SIZE_ROWS) {
  const s = sizeOf(key);
  md += `| ${label} | ${codings.map((c) => `${MB(s[c])} (${pct(s[c], base[c])})`).join(" | ")} |\n`;
}
// targets: best densewire format on the wire vs gzipped row Protobuf (double)
const dwKeys = (t) => ["msgpack", "protobuf", "arrow", "json", "json-rows", "json-columns", "csv"].map((f) => `${t}.${f}`);
const best = (t, coding) => dwKeys(t).map((k) => [k, sizeOf(k)[coding]]).sort((a, b) => a[1] - b[1])[0];
md += `\n### Targets on the wire (baseline: row-oriented Protobuf, double coordinates, gzip -6 = ${base.gzip6.toLocaleString("en")} B, gzip -9 = ${base.gzip9.toLocaleString("en")} B)\n\n`;
md += `| densewire table | coding | best format | bytes | of gzip -6 rows | of gzip -9 rows | target |\n|---|---|---|---:|---:|---:|---|\n`;
for (const [t, target] of [["points", 80], ["points_f32", 60]]) {
  for (const coding of ["gzip6", "gzip9", "br11", "zstd19"]) {
    const [k, n] = best(t, coding);
    const r6 = (100 * n) / base.gzip6;
    const r9 = (100 * n) / base.gzip9;
    md += `| ${t} | ${coding} | ${k.split(".")[1]} | ${n.toLocaleString("en")} | ${r6.toFixed(1)} % | ${r9.toFixed(1)} % | ≤ ${target} %: ${Math.max(r6, r9) <= target ? "met" : "NOT met"} |\n`;
  }
}
const pbNode = nodeStats.find((s) => s.id === "protobufjs rows");
const pbChrome = chromeStats.find((s) => s.id === "protobufjs rows");
md += `\n### Decode: body bytes -> usable data (ms; median and min of ${opts.rounds} rounds x ${opts.iterations} after ${opts.warmup} warm-up; speed-up = protobufjs rows' time / this decoder's time, median to median and min to min)\n\n`;
md += `| decoder | produces | Node median | Node min | Node speed-up (median, min) | Chromium median | Chromium min | Chromium speed-up (median, min) |\n|---|---|---:|---:|---:|---:|---:|---:|\n`;
for (const c of node.CASES) {
  const n = nodeStats.find((s) => s.id === c.id);
  const b = chromeStats.find((s) => s.id === c.id);
  const f = (x) => x.toFixed(x < 1 ? 3 : 2);
  md += `| ${c.label} | ${c.produces} | ${f(n.medianMs)} | ${f(n.minMs)} | ${(pbNode.medianMs / n.medianMs).toFixed(1)}x, ${(pbNode.minMs / n.minMs).toFixed(1)}x | ${f(b.medianMs)} | ${f(b.minMs)} | ${(pbChrome.medianMs / b.medianMs).toFixed(1)}x, ${(pbChrome.minMs / b.minMs).toFixed(1)}x |\n`;
}
md += `\nChromium: ${chromiumVersion}; cross-origin isolated (5 us timer): ${browserResult.isolated}. Every decoder's output checked against densewire's Protobuf of its table (rows, status sum, longitude and latitude sums in row order, first and last uuid): ${problems.length ? "MISMATCH: " + problems.join("; ") : "all identical"}.\n`;
writeFileSync(join(dir, "report.md"), md);
writeFileSync(join(dir, "results.json"), JSON.stringify({ opts, sizes, paths, node: nodeStats, chromium: chromeStats, chromiumVersion, isolated: browserResult.isolated, userAgent: browserResult.userAgent }, null, 2));
console.log(md);
console.error(`results in ${dir}`);
