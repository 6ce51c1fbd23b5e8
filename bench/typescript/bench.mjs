// Decoding 1000 x 1536 float32 embeddings in every densewire format, side by side in one run.
//
//   cd typescript && npm ci && npm run build && cd .. && node bench/typescript/bench.mjs [--quick]
//
// Every body starts as bytes off the wire (a Uint8Array), as fetch's arrayBuffer() gives them, and
// every decoder ends with the float32 values in one typed array. Figures: median of the timed runs,
// after warm-up. No assertion on time anywhere: the figures are for RESULTS.md.
import { createRequire } from "node:module";
import { unitRows } from "./rows.mjs";
import { pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import os from "node:os";

const pkg = new URL("../../typescript/", import.meta.url);
const require = createRequire(new URL("package.json", pkg));
const dw = await import(new URL("dist/index.js", pkg).href);
const { fromBinary } = await import(pathToFileURL(require.resolve("@bufbuild/protobuf")).href);
const { readFileSync } = await import("node:fs");
const arrowVersion = JSON.parse(readFileSync(new URL("node_modules/apache-arrow/package.json", pkg), "utf8")).version;

const quick = process.argv.includes("--quick");
const N = 1000;
const D = 1536;

const values = unitRows(N, D);
const tensor = dw.makeTensor("float32", [N, D], values);
const meta = { model: "bench-model", usage: { prompt_tokens: 12000, total_tokens: 12000 } };
const enc = new TextEncoder();

const jsonFloat = enc.encode(dw.encodeJSON(tensor, { encodingFormat: "float", ...meta }));
const jsonB64 = enc.encode(dw.encodeJSON(tensor, { encodingFormat: "base64", ...meta }));
const raw = dw.encodeRaw(tensor, meta);
const rawBody = raw.body.slice(); // a fresh, aligned buffer as fetch gives
const msgpack = dw.encodeMsgpack(tensor, meta).slice(); // "bench-model": the bin payload lands at byte 56
const msgpackOdd = dw.encodeMsgpack(tensor, { ...meta, model: "bench-model-2" }).slice(); // at byte 58: unaligned
const protobuf = dw.encodeProtobuf(tensor, meta).slice(); // "bench-model": the data payload lands at byte 31
const protobufAligned = dw.encodeProtobuf(tensor, { ...meta, model: "bench-model2" }).slice(); // at byte 32
const arrow = (await dw.encodeArrow(tensor, meta)).slice();

/** The baseline most code runs today: JSON.parse of float arrays, then into a Float32Array. */
function naiveJSONFloat(bytes) {
  const doc = JSON.parse(new TextDecoder().decode(bytes));
  const out = new Float32Array(doc.data.length * doc.data[0].embedding.length);
  for (const item of doc.data) out.set(item.embedding, item.index * D);
  return out;
}

/** The common decoding of Base64 rows into number[] rows, as SDKs return them: Buffer per row, Float32Array view, Array.from. */
function numberRows(bytes) {
  const doc = JSON.parse(new TextDecoder().decode(bytes));
  return doc.data.map((item) => {
    const buf = Buffer.from(item.embedding, "base64");
    return Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4));
  });
}

/** The generated-code route: fromBinary, then the same Float32Array view-or-copy as decodeProtobuf. */
function pbGenerated(bytes) {
  const m = fromBinary(dw.pb.EmbeddingsResponseSchema, bytes);
  const data = m.embeddings.data;
  return data.byteOffset % 4 === 0 ? new Float32Array(data.buffer, data.byteOffset, data.length / 4) : new Float32Array(data.slice().buffer);
}

const cases = [
  ["JSON floats: JSON.parse + Float32Array (baseline)", jsonFloat, () => naiveJSONFloat(jsonFloat)],
  ["JSON floats: densewire decodeJSON", jsonFloat, () => dw.decodeJSON(jsonFloat)],
  ["JSON+Base64: Buffer per row + Array.from (number[] rows)", jsonB64, () => numberRows(jsonB64)],
  ["JSON+Base64: densewire decodeJSON (Buffer backend)", jsonB64, () => dw.decodeJSON(jsonB64), "node"],
  ["JSON+Base64: densewire decodeJSON (portable JS backend)", jsonB64, () => dw.decodeJSON(jsonB64), "js"],
  ["raw: densewire decodeRaw", rawBody, () => dw.decodeRaw(rawBody, raw.headers)],
  ["MessagePack: densewire decodeMsgpack (payload aligned)", msgpack, () => dw.decodeMsgpack(msgpack)],
  ["MessagePack: densewire decodeMsgpack (payload unaligned)", msgpackOdd, () => dw.decodeMsgpack(msgpackOdd)],
  ["Protobuf: densewire decodeProtobuf, minimal reader (payload unaligned)", protobuf, () => dw.decodeProtobuf(protobuf, { message: "EmbeddingsResponse" })],
  ["Protobuf: @bufbuild/protobuf fromBinary, generated code (payload unaligned)", protobuf, () => pbGenerated(protobuf)],
  ["Protobuf: densewire decodeProtobuf, minimal reader (payload aligned)", protobufAligned, () => dw.decodeProtobuf(protobufAligned, { message: "EmbeddingsResponse" })],
  ["Protobuf: @bufbuild/protobuf fromBinary, generated code (payload aligned)", protobufAligned, () => pbGenerated(protobufAligned)],
  ["Arrow IPC: densewire decodeArrow (apache-arrow)", arrow, () => dw.decodeArrow(arrow)],
];

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const zeroCopy = (result, body) => {
  const data = result.data ?? result; // a tensor, or a typed array
  return data.buffer === body.buffer ? "view" : "copy";
};

// round-robin: every round runs each decoder once, so that load from other processes on the
// machine spreads over all of them alike; the figure is the median over rounds. Decoders that take
// under a millisecond are timed over a batch of calls per round (per-call time = batch time / calls).
const rounds = quick ? 7 : 25;
const times = cases.map(() => []);
const copies = [];
const batch = [];
for (let r = -2; r < rounds; r++) {
  for (let i = 0; i < cases.length; i++) {
    const [, body, fn, backend] = cases[i];
    if (backend) dw.setBase64Backend(backend);
    const calls = batch[i] ?? 1;
    let result;
    const t0 = performance.now();
    for (let k = 0; k < calls; k++) result = await fn();
    const t1 = performance.now();
    dw.setBase64Backend("auto");
    if (r >= 0) times[i].push((t1 - t0) / calls);
    else {
      copies[i] = Array.isArray(result) ? "arrays" : zeroCopy(result, body);
      if (r === -1) batch[i] = t1 - t0 < 1 ? 200 : 1;
    }
  }
}
const rows = cases.map(([name, body], i) => ({ name, bytes: body.length, gzip: gzipSync(body).length, ms: median(times[i]), copy: copies[i], calls: batch[i] }));

const base = rows[0].ms;
const mb = (x) => (x / 1e6).toFixed(2);
console.log(`densewire TypeScript decode benchmark: ${N} x ${D} float32 (${mb(N * D * 4)} MB of values)`);
console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? "?"} x ${os.cpus().length}, apache-arrow ${arrowVersion}, base64 backend auto=${dw.base64Backend()}`);
console.log("");
console.log(`median of ${rounds} round-robin rounds after 2 warm-up rounds; decoders under 1 ms timed over 200 calls a round`);
console.log("");
console.log("| format and decoder | body MB | gzip -6 MB | median ms | speed-up vs JSON.parse | result |");
console.log("|---|---:|---:|---:|---:|---|");
for (const r of rows) {
  const ms = r.ms < 0.01 ? r.ms.toFixed(4) : r.ms < 1 ? r.ms.toFixed(3) : r.ms.toFixed(1);
  console.log(`| ${r.name} | ${mb(r.bytes)} | ${mb(r.gzip)} | ${ms} | ${Math.round(base / r.ms).toLocaleString("en")}x | ${r.copy} |`);
}
