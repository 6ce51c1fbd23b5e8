/**
 * The /demo page of `densewire serve`: loads the demo table in every format, draws the points on a
 * map, and shows what each format costs, measured live in this browser: bytes on the wire
 * (compressed and not, from PerformanceResourceTiming), download time, decode time (the library's
 * table decoders, timed with performance.now()), draw time and the total to first paint.
 *
 * The tables come from this page's own server, or from the server named by `?api=` (for instance
 * `/demo/?api=https://data.example.com`), which must allow this page's origin (`--cors-origins`) and
 * serve its tables without a key (`--public-tables`) when it has one.
 *
 * On load the page runs every format of both tables once (`?run=0` turns that off). While the server
 * is still building a table's compressed representations (`GET /v1/tables` lists it as `warming`),
 * the rows measured meanwhile are marked so, kept apart from the finished ones and out of the chart
 * (an uncompressed body is not comparable with a compressed one); when the table is ready the page
 * measures it again by itself.
 *
 * The results are also on `window.densewireDemo` (the headless Chromium test reads them there).
 */
import { decodeTableBody } from "./tables.js";
import { type TableDigest, digestTable } from "./digest.js";

export const FORMATS = ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"] as const;
export type TableFormat = (typeof FORMATS)[number];
export const TABLES = ["points", "points_f32"] as const;
/** Where the tables come from: `?api=` or this page's origin. */
const API = new URLSearchParams(location.search).get("api") ?? location.origin;
/** Run every format once on load, and again once a warming table is ready; `?run=0` turns it off. */
const AUTO_RUN = new URLSearchParams(location.search).get("run") !== "0";
/** How often the page asks for the build state while a table is warming. */
const POLL_MS = 1000;

const LABELS: Record<TableFormat, string> = {
  json: "JSON objects",
  "json-rows": "JSON rows",
  "json-columns": "JSON columns",
  csv: "CSV",
  msgpack: "MessagePack (columnar)",
  protobuf: "Protobuf (columnar)",
  arrow: "Arrow IPC stream",
};

export interface DemoResult {
  table: string;
  format: TableFormat;
  ok: boolean;
  error?: string;
  rows: number;
  contentType: string;
  contentEncoding: string;
  /** PerformanceResourceTiming.transferSize: headers and body as they came over the network. */
  transferSize: number;
  /** encodedBodySize: the body as sent (compressed when a content coding was applied). */
  encodedBodySize: number;
  /** decodedBodySize: the body after HTTP decompression, what the table decoder reads. */
  decodedBodySize: number;
  /** responseEnd - requestStart (request sent to last body byte). */
  downloadMs: number;
  /** fetch() called to body bytes in hand. */
  fetchMs: number;
  decodeMs: number;
  drawMs: number;
  /** fetch() called to the frame with the points painted. */
  firstPaintMs: number;
  digest: string;
  columnDigests: Record<string, string>;
  drawn: number;
  /** The server was still building this table's compressions while it was measured (status
   *  `warming` in GET /v1/tables before or after): its figures are not comparable with finished ones. */
  warming: boolean;
}

interface DemoAPI {
  ready: boolean;
  formats: readonly TableFormat[];
  tables: readonly string[];
  results: DemoResult[];
  running: boolean;
  /** Whether the page runs by itself (not `?run=0`). */
  autoRun: boolean;
  /** The build state of each table from the last GET /v1/tables: loading, warming, ready, stale, failed. */
  tableStatus: Record<string, string>;
  run(table: string, format: TableFormat): Promise<DemoResult>;
  runAll(tables?: readonly string[]): Promise<DemoResult[]>;
  /** Pixels of the map currently in a status colour (the test checks the map shows points). */
  pointPixels(): { status0: number; status1: number };
  colours: { background: string; status0: string; status1: string };
}

declare global {
  interface Window {
    densewireDemo: DemoAPI;
  }
}

// ---- the map ------------------------------------------------------------------------------------
const W = 1200;
const H = 600;
const BACKGROUND = [0x0b, 0x1d, 0x2e];
const GRID = [0x1d, 0x3a, 0x55];
const STATUS0 = [0xff, 0x9f, 0x1c]; // status 0: amber
const STATUS1 = [0x2e, 0xd3, 0xff]; // status 1: cyan
const rgba = (c: number[]): number => ((0xff << 24) | (c[2]! << 16) | (c[1]! << 8) | c[0]!) >>> 0; // little-endian ImageData
const hex = (c: number[]): string => "#" + c.map((x) => x.toString(16).padStart(2, "0")).join("");

let base: Uint32Array | undefined;
function baseMap(): Uint32Array {
  if (base) return base;
  base = new Uint32Array(W * H).fill(rgba(BACKGROUND));
  const grid = rgba(GRID);
  for (let lon = -180; lon <= 180; lon += 30) {
    const x = Math.min(W - 1, Math.round(((lon + 180) / 360) * W));
    for (let y = 0; y < H; y++) base[y * W + x] = grid;
  }
  for (let lat = -90; lat <= 90; lat += 30) {
    const y = Math.min(H - 1, Math.round(((90 - lat) / 180) * H));
    base.fill(grid, y * W, y * W + W);
  }
  return base;
}

type Coords = Float64Array | Float32Array | ArrayLike<number>;

/** Equirectangular projection, one 2x2 dot a point, coloured by status. Returns the points drawn. */
function draw(canvas: HTMLCanvasElement, lon: Coords, lat: Coords, status: ArrayLike<number> | undefined): number {
  const ctx = canvas.getContext("2d")!;
  const image = ctx.createImageData(W, H);
  const px = new Uint32Array(image.data.buffer);
  px.set(baseMap());
  const c0 = rgba(STATUS0);
  const c1 = rgba(STATUS1);
  const sx = W / 360;
  const sy = H / 180;
  let drawn = 0;
  for (let i = 0; i < lon.length; i++) {
    const x = ((lon[i]! + 180) * sx) | 0;
    const y = ((90 - lat[i]!) * sy) | 0;
    if (!(x >= 0 && x < W - 1 && y >= 0 && y < H - 1)) continue;
    const c = status !== undefined && status[i] === 1 ? c1 : c0;
    const o = y * W + x;
    px[o] = c;
    px[o + 1] = c;
    px[o + W] = c;
    px[o + W + 1] = c;
    drawn++;
  }
  ctx.putImageData(image, 0, 0);
  return drawn;
}

/** Resolves after the next frame has been painted (rAF runs before paint; the message task after). */
function afterPaint(): Promise<void> {
  return new Promise((resolve) =>
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => resolve();
      ch.port2.postMessage(0);
    }),
  );
}

async function resourceEntry(url: string): Promise<PerformanceResourceTiming | undefined> {
  for (let i = 0; i < 100; i++) {
    const entries = performance.getEntriesByName(url, "resource") as PerformanceResourceTiming[];
    if (entries.length > 0) return entries[entries.length - 1];
    await new Promise((r) => setTimeout(r, 5));
  }
  return undefined;
}

// ---- the tables' build state ---------------------------------------------------------------------
/** GET /v1/tables: each table's status (`warming` while its compressions are being built). */
async function refreshStatus(): Promise<Record<string, string>> {
  try {
    const response = await fetch(new URL("/v1/tables", API).href, { cache: "no-store" });
    if (response.ok) {
      const doc = (await response.json()) as { data: { name: string; status: string }[] };
      demo.tableStatus = Object.fromEntries(doc.data.map((t) => [t.name, t.status]));
    }
  } catch {
    // the listing is informative: a failed one leaves the last known state
  }
  return demo.tableStatus;
}

const isWarming = (table: string): boolean => ["loading", "warming"].includes(demo.tableStatus[table] ?? "");

/** Measures `table` in `formats`, asking for its build state before and after. */
async function measure(table: string, formats: readonly TableFormat[]): Promise<DemoResult[]> {
  await refreshStatus();
  let warming = isWarming(table);
  const out: DemoResult[] = [];
  for (const f of formats) out.push(await run(table, f, warming));
  await refreshStatus();
  if (isWarming(table) && !warming) {
    warming = true;
    for (const r of out) r.warming = true;
  }
  render();
  return out;
}

let watching = false;
/** While a measured table is warming: ask for its state every POLL_MS; once ready, measure it again. */
async function watchWarming(): Promise<void> {
  if (watching) return;
  watching = true;
  try {
    for (;;) {
      const waiting = [...new Set(demo.results.filter((r) => r.warming).map((r) => r.table))];
      if (waiting.length === 0) return;
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (demo.running) continue;
      await refreshStatus();
      render();
      const ready = waiting.filter((t) => !isWarming(t));
      if (ready.length === 0) continue;
      demo.running = true;
      setButtons(true);
      try {
        for (const t of ready) {
          const formats = FORMATS.filter((f) => demo.results.some((r) => r.table === t && r.format === f && r.warming));
          await measure(t, formats);
        }
      } finally {
        demo.running = false;
        setButtons(false);
      }
    }
  } finally {
    watching = false;
  }
}

// ---- one measurement ----------------------------------------------------------------------------
async function run(table: string, format: TableFormat, warming = isWarming(table)): Promise<DemoResult> {
  const url = new URL(`/v1/tables/${encodeURIComponent(table)}?format=${format}`, API).href;
  const canvas = document.getElementById("map") as HTMLCanvasElement;
  const result: DemoResult = {
    table, format, ok: false, rows: 0, contentType: "", contentEncoding: "", transferSize: 0, encodedBodySize: 0,
    decodedBodySize: 0, downloadMs: 0, fetchMs: 0, decodeMs: 0, drawMs: 0, firstPaintMs: 0, digest: "", columnDigests: {}, drawn: 0,
    warming,
  };
  performance.clearResourceTimings();
  try {
    const t0 = performance.now();
    const response = await fetch(url, { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${(await response.text()).slice(0, 300)}`);
    const body = new Uint8Array(await response.arrayBuffer());
    const t1 = performance.now();
    const decoded = await decodeTableBody(body, format, response.headers);
    const t2 = performance.now();
    const col = (name: string) => decoded.columns.find((c) => c.name === name)?.values as ArrayLike<number> | undefined;
    const lon = col("longitude");
    const lat = col("latitude");
    if (lon === undefined || lat === undefined) throw new Error("the table has no longitude/latitude columns");
    result.drawn = draw(canvas, lon, lat, col("status"));
    const t3 = performance.now();
    await afterPaint();
    const t4 = performance.now();
    const entry = await resourceEntry(url);
    const d = digestTable(decoded);
    Object.assign(result, {
      ok: true,
      rows: decoded.rows,
      contentType: response.headers.get("content-type") ?? "",
      contentEncoding: response.headers.get("content-encoding") ?? "identity",
      transferSize: entry?.transferSize ?? NaN,
      encodedBodySize: entry?.encodedBodySize ?? NaN,
      decodedBodySize: entry?.decodedBodySize ?? body.byteLength,
      downloadMs: entry ? entry.responseEnd - entry.requestStart : NaN,
      fetchMs: t1 - t0,
      decodeMs: t2 - t1,
      drawMs: t3 - t2,
      firstPaintMs: t4 - t0,
      digest: d.digest,
      columnDigests: d.columns,
    } satisfies Partial<DemoResult>);
    (document.getElementById("caption") as HTMLElement).textContent =
      `${table}, ${LABELS[format]}: ${result.drawn.toLocaleString("en")} of ${decoded.rows.toLocaleString("en")} points`;
    void (d satisfies TableDigest);
  } catch (e) {
    result.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  const i = demo.results.findIndex((r) => r.table === table && r.format === format);
  if (i >= 0) demo.results[i] = result;
  else demo.results.push(result);
  render();
  return result;
}

async function runAll(tables: readonly string[] = TABLES): Promise<DemoResult[]> {
  demo.running = true;
  setButtons(true);
  try {
    demo.results = [];
    render();
    const out: DemoResult[] = [];
    for (const t of tables) out.push(...(await measure(t, FORMATS)));
    return out;
  } finally {
    demo.running = false;
    setButtons(false);
    if (AUTO_RUN) void watchWarming();
  }
}

function pointPixels(): { status0: number; status1: number } {
  const canvas = document.getElementById("map") as HTMLCanvasElement;
  const data = new Uint32Array(canvas.getContext("2d")!.getImageData(0, 0, W, H).data.buffer);
  const c0 = rgba(STATUS0);
  const c1 = rgba(STATUS1);
  let status0 = 0;
  let status1 = 0;
  for (let i = 0; i < data.length; i++) {
    if (data[i] === c0) status0++;
    else if (data[i] === c1) status1++;
  }
  return { status0, status1 };
}

// ---- the results table and the bar chart -------------------------------------------------------
const fmtBytes = (n: number): string =>
  !Number.isFinite(n) ? "–" : n >= 1e6 ? `${(n / 1e6).toFixed(2)} MB` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} kB` : `${n} B`;
const fmtMs = (n: number): string => (!Number.isFinite(n) ? "–" : n < 10 ? n.toFixed(2) : n.toFixed(1));

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function resultRow(r: DemoResult, digests: Map<string, Set<string>>): HTMLTableRowElement {
  const tr = el("tr");
  tr.dataset.table = r.table;
  tr.dataset.format = r.format;
  if (r.warming) tr.className = "warming";
  const cells: [string, string?][] = [
    [r.table],
    [LABELS[r.format]],
    [r.ok ? r.rows.toLocaleString("en") : "error", "num"],
    [fmtBytes(r.encodedBodySize), "num"],
    [r.contentEncoding],
    [fmtBytes(r.decodedBodySize), "num"],
    [fmtMs(r.downloadMs), "num"],
    [fmtMs(r.decodeMs), "num"],
    [fmtMs(r.drawMs), "num"],
    [fmtMs(r.firstPaintMs), "num"],
  ];
  for (const [text, cls] of cells) tr.append(el("td", text, cls));
  const dg = el("td", r.ok ? r.digest : (r.error ?? "error"), "digest");
  if (r.ok) dg.classList.add((digests.get(r.table)?.size ?? 0) === 1 ? "same" : "differs");
  else dg.classList.add("differs");
  tr.append(dg);
  tr.append(el("td", r.warming ? `${r.table}: compressions still being built on the server` : "", "state"));
  return tr;
}

function render(): void {
  const tbody = document.querySelector("#results tbody") as HTMLElement;
  tbody.replaceChildren();
  const digests = new Map<string, Set<string>>();
  for (const r of demo.results) if (r.ok) (digests.get(r.table) ?? digests.set(r.table, new Set()).get(r.table)!).add(r.digest);
  for (const r of demo.results) if (!r.warming) tbody.append(resultRow(r, digests));
  const warming = demo.results.filter((r) => r.warming);
  if (warming.length > 0) {
    const tables = [...new Set(warming.map((r) => r.table))];
    const head = el("tr", undefined, "warming-head");
    const td = el(
      "td",
      `Measured while the server was still building the compressed bodies of ${tables.join(", ")} ` +
        `(status: ${tables.map((t) => demo.tableStatus[t] ?? "?").join(", ")}): these bodies may come uncompressed, ` +
        `so their figures are not compared with the rows above nor drawn in the chart` +
        (AUTO_RUN ? "; measured again when the table is ready." : "; run it again when the table is ready."),
    );
    td.colSpan = 12;
    head.append(td);
    tbody.append(head);
    for (const r of warming) tbody.append(resultRow(r, digests));
  }
  renderChart();
}

function renderChart(): void {
  const chart = document.getElementById("chart") as HTMLElement;
  chart.replaceChildren();
  const ok = demo.results.filter((r) => r.ok && !r.warming);
  if (ok.length === 0) return;
  const maxBytes = Math.max(...ok.map((r) => r.decodedBodySize));
  const maxMs = Math.max(...ok.map((r) => r.firstPaintMs));
  const head = el("div", undefined, "bar-row bar-head");
  head.append(el("span", "format", "bar-label"), el("span", "bytes: on the wire ■ / uncompressed □", "bar-cell"), el("span", "time to first paint: download ■ decode ■ draw ■", "bar-cell"));
  chart.append(head);
  for (const r of ok) {
    const row = el("div", undefined, "bar-row");
    row.append(el("span", `${r.table} · ${LABELS[r.format]}`, "bar-label"));
    const bytes = el("span", undefined, "bar-cell");
    const raw = el("span", undefined, "bar raw");
    raw.style.width = `${(70 * r.decodedBodySize) / maxBytes}%`; // room for the label
    const wire = el("span", undefined, "bar wire");
    wire.style.width = `${(100 * r.encodedBodySize) / r.decodedBodySize}%`;
    raw.append(wire);
    bytes.append(raw, el("span", `${fmtBytes(r.encodedBodySize)} / ${fmtBytes(r.decodedBodySize)}`, "bar-text"));
    const time = el("span", undefined, "bar-cell");
    const stack = el("span", undefined, "stack");
    const other = Math.max(0, r.firstPaintMs - r.fetchMs - r.decodeMs - r.drawMs);
    for (const [ms, cls] of [[r.fetchMs, "download"], [r.decodeMs, "decode"], [r.drawMs + other, "draw"]] as const) {
      const s = el("span", undefined, `bar ${cls}`);
      s.style.width = `${(100 * ms) / maxMs}%`;
      stack.append(s);
    }
    time.append(stack, el("span", `${fmtMs(r.firstPaintMs)} ms`, "bar-text"));
    row.append(bytes, time);
    chart.append(row);
  }
}

function setButtons(disabled: boolean): void {
  for (const b of document.querySelectorAll("button")) (b as HTMLButtonElement).disabled = disabled;
}

const demo: DemoAPI = {
  ready: false,
  formats: FORMATS,
  tables: TABLES,
  results: [],
  running: false,
  autoRun: AUTO_RUN,
  tableStatus: {},
  run,
  runAll,
  pointPixels,
  colours: { background: hex(BACKGROUND), status0: hex(STATUS0), status1: hex(STATUS1) },
};
window.densewireDemo = demo;

function init(): void {
  const canvas = document.getElementById("map") as HTMLCanvasElement;
  canvas.width = W;
  canvas.height = H;
  const ctx = canvas.getContext("2d")!;
  const image = ctx.createImageData(W, H);
  new Uint32Array(image.data.buffer).set(baseMap());
  ctx.putImageData(image, 0, 0);
  (document.getElementById("run-all") as HTMLButtonElement).onclick = () => void runAll();
  const buttons = document.getElementById("one") as HTMLElement;
  for (const t of TABLES) {
    for (const f of FORMATS) {
      const b = el("button", `${t === "points" ? "" : "f32 "}${f}`);
      b.title = `GET ${new URL(`/v1/tables/${t}?format=${f}`, API).href}`;
      b.onclick = async () => {
        setButtons(true);
        try {
          await measure(t, [f]);
        } finally {
          setButtons(false);
          if (AUTO_RUN) void watchWarming();
        }
      };
      buttons.append(b);
    }
  }
  for (const [id, c] of [["key0", STATUS0], ["key1", STATUS1]] as const) (document.getElementById(id) as HTMLElement).style.background = hex(c);
  (document.getElementById("timer") as HTMLElement).textContent = crossOriginIsolated
    ? "This page is cross-origin isolated: its timer resolution is 5 µs."
    : "This page is not cross-origin isolated: browsers round its timer to 0.1 ms, so sub-millisecond decodes show coarsely.";
  (document.getElementById("caption") as HTMLElement).textContent = AUTO_RUN
    ? "Fetching every format of both tables…"
    : "Press “Run all formats”, or one format (?run=0: nothing runs by itself).";
  demo.ready = true;
  if (AUTO_RUN) void runAll();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
