/**
 * Decode times of the table decoders on the 67,627-row demo table, every format, side by side in one
 * process (not a test: no timed assertions; TS-DEMO's bench/tables/ has the recorded benchmark).
 *
 *   node build/test/tables-measure.js DIR [ROUNDS]
 *
 * DIR holds bodies written by densewire (Python) as NAME.FORMAT plus NAME.headers.json, e.g.:
 *   /work/main/.venv/bin/python -c 'import densewire._tables as t, json; ...encode_table(demo_table(), f)...'
 * Every format must decode to the same table (checked bit for bit before timing). Also compared:
 * Protobuf through @bufbuild/protobuf's fromBinary(TableSchema) + byte-stream-unsplit, and bare
 * JSON.parse of the JSON bodies.
 */
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { type Table, type TableFormat, TABLE_FORMATS, byteStreamUnsplit, decodeTable, decodeTableProtobuf, pb } from "../src/index.js";
import { assertTableEqual } from "./tables-helpers.js";

const dir = process.argv[2];
const rounds = Number(process.argv[3] ?? 30);
if (dir === undefined || !existsSync(dir)) {
  console.error("usage: node build/test/tables-measure.js DIR [ROUNDS]");
  process.exit(2);
}

async function time(fn: () => unknown | Promise<unknown>): Promise<{ best: number; median: number }> {
  for (let i = 0; i < 3; i++) await fn(); // warm up
  const t: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const s = process.hrtime.bigint();
    await fn();
    t.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  t.sort((a, b) => a - b);
  return { best: t[0]!, median: t[Math.floor(t.length / 2)]! };
}

/** fromBinary of the generated schema, then the same column finishing (unsplit) as the hand reader. */
function viaFromBinary(body: Uint8Array): number {
  const m = fromBinary(pb.TableSchema, body);
  let total = 0;
  for (const c of m.columns) {
    const w = c.type === pb.ColumnType.FLOAT32_VECTOR ? 4 : [0, 1, 4, 8, 4, 8, 0, 16][c.type]!;
    const bytes = c.encoding === pb.ColumnEncoding.BYTE_STREAM_SPLIT ? byteStreamUnsplit(c.data, w) : c.data;
    total += bytes.length;
  }
  return total;
}

console.log(`node ${process.version}, ${rounds} rounds; load ${readFileSync("/proc/loadavg", "utf8").trim()}`);
for (const name of ["points", "points_f32"]) {
  const headers = JSON.parse(readFileSync(join(dir, `${name}.headers.json`), "utf8")) as Record<string, string>;
  let reference: Table | undefined;
  for (const format of TABLE_FORMATS) {
    const file = join(dir, `${name}.${format}`);
    const body = new Uint8Array(readFileSync(file));
    const decoded = await decodeTable(body, format as TableFormat, { headers });
    if (reference === undefined) reference = decoded;
    else assertTableEqual(decoded, reference, `${name}.${format}`);
    const r = await time(() => decodeTable(body, format as TableFormat, { headers }));
    console.log(`${name.padEnd(10)} ${format.padEnd(12)} ${String(body.length).padStart(8)} B  decode best ${r.best.toFixed(2).padStart(7)} ms  median ${r.median.toFixed(2).padStart(7)} ms`);
    if (format.startsWith("json")) {
      const text = new TextDecoder().decode(body);
      const j = await time(() => JSON.parse(text));
      console.log(`${"".padEnd(10)} ${"(JSON.parse)".padEnd(12)} ${"".padStart(8)}    alone best ${j.best.toFixed(2).padStart(7)} ms  median ${j.median.toFixed(2).padStart(7)} ms`);
    }
    if (format === "protobuf") {
      if (viaFromBinary(body) !== decoded.columns.reduce((s, c) => s + (c.type === "string" ? 0 : c.values.byteLength), 0)) throw new Error("fromBinary disagrees");
      const f = await time(() => viaFromBinary(body));
      const h = await time(() => decodeTableProtobuf(body));
      console.log(`${"".padEnd(10)} ${"(fromBinary)".padEnd(12)} ${"".padStart(8)}     best ${f.best.toFixed(2).padStart(7)} ms  median ${f.median.toFixed(2).padStart(7)} ms  (hand reader again: best ${h.best.toFixed(2)} median ${h.median.toFixed(2)})`);
    }
  }
  console.log(`${name}: all ${TABLE_FORMATS.length} formats decode to the same ${reference!.rows} rows, bit for bit`);
}
