// Quantized embeddings in TypeScript: bytes on the wire and the time from body bytes to float32
// values in hand, for float32 against int8 codes dequantized with the published ranges (SPEC.md 17),
// 1000 x 1024 (the size), side by side in one run.
//
//   cd typescript && npm ci && npm run build && cd .. && node bench/typescript/quantization.mjs [--quick]
//
// The ranges are the per-dimension min/max of the vectors themselves (a calibration set), so every
// code is in range. Every body starts as a Uint8Array off the wire; every row of the table ends with
// a Float32Array of n x d values (decode, then dequantize for int8). Figures: median of round-robin
// rounds after warm-up; no assertion on time anywhere.
import os from "node:os";
import { unitRows } from "./rows.mjs";

const pkg = new URL("../../typescript/", import.meta.url);
const dw = await import(new URL("dist/index.js", pkg).href);

const quick = process.argv.includes("--quick");
const N = 1000;
const D = 1024;

const values = unitRows(N, D);
const lower = new Float32Array(D).fill(Infinity);
const upper = new Float32Array(D).fill(-Infinity);
for (let k = 0; k < N * D; k++) {
  const j = k % D;
  lower[j] = Math.min(lower[j], values[k]);
  upper[j] = Math.max(upper[j], values[k]);
}
const floats = dw.makeTensor("float32", [N, D], values);
const q = { lower, upper };
const codes = { ...dw.quantize(floats, q, "int8"), quantization: dw.quantizationId(lower, upper) };
const meta = { model: "bench-model", usage: { prompt_tokens: 12000, total_tokens: 12000 } };
const enc = new TextEncoder();

const bodies = {
  f32JsonFloat: enc.encode(dw.encodeJSON(floats, { encodingFormat: "float", ...meta })),
  i8JsonFloat: enc.encode(dw.encodeJSON(codes, { encodingFormat: "float", ...meta })),
  f32JsonB64: enc.encode(dw.encodeJSON(floats, { encodingFormat: "base64", ...meta })),
  i8JsonB64: enc.encode(dw.encodeJSON(codes, { encodingFormat: "base64", ...meta })),
  f32Raw: dw.encodeRaw(floats, meta),
  i8Raw: dw.encodeRaw(codes, meta),
};
const f32RawBody = bodies.f32Raw.body.slice();
const i8RawBody = bodies.i8Raw.body.slice();
const decodedCodes = dw.decodeRaw(i8RawBody, bodies.i8Raw.headers);

const cases = [
  ["float32, JSON numbers: decodeJSON", bodies.f32JsonFloat, () => dw.decodeJSON(bodies.f32JsonFloat)],
  ["int8, JSON numbers: decodeJSON + dequantize", bodies.i8JsonFloat, () => dw.dequantize(dw.decodeJSON(bodies.i8JsonFloat), q)],
  ["float32, JSON + Base64: decodeJSON", bodies.f32JsonB64, () => dw.decodeJSON(bodies.f32JsonB64)],
  ["int8, JSON + Base64: decodeJSON + dequantize", bodies.i8JsonB64, () => dw.dequantize(dw.decodeJSON(bodies.i8JsonB64), q)],
  ["float32, raw: decodeRaw", f32RawBody, () => dw.decodeRaw(f32RawBody, bodies.f32Raw.headers)],
  ["int8, raw: decodeRaw + dequantize", i8RawBody, () => dw.dequantize(dw.decodeRaw(i8RawBody, bodies.i8Raw.headers), q)],
  ["int8 codes already decoded: dequantize alone", i8RawBody, () => dw.dequantize(decodedCodes, q)],
];

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rounds = quick ? 7 : 25;
const times = cases.map(() => []);
const batch = [];
for (let r = -2; r < rounds; r++) {
  for (let i = 0; i < cases.length; i++) {
    const calls = batch[i] ?? 1;
    const t0 = performance.now();
    for (let k = 0; k < calls; k++) cases[i][2]();
    const t1 = performance.now();
    if (r >= 0) times[i].push((t1 - t0) / calls);
    else if (r === -1) batch[i] = t1 - t0 < 1 ? 200 : 1;
  }
}
const base = median(times[0]);
const mb = (x) => (x / 1e6).toFixed(2);
console.log(`densewire TypeScript quantized decode benchmark: ${N} x ${D}, float32 against int8 codes dequantized to float32`);
console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? "?"} x ${os.cpus().length}`);
console.log("");
console.log(`median of ${rounds} round-robin rounds after 2 warm-up rounds; steps under 1 ms timed over 200 calls a round`);
console.log("");
console.log("| body and decoding, to float32 values | body MB | median ms | speed-up vs float32 JSON numbers |");
console.log("|---|---:|---:|---:|");
cases.forEach(([name, body], i) => {
  const ms = median(times[i]);
  console.log(`| ${name} | ${mb(body.length)} | ${ms < 1 ? ms.toFixed(3) : ms.toFixed(1)} | ${(base / ms).toFixed(ms < 1 ? 0 : 1)}x |`);
});
