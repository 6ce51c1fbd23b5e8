// Per-token and sparse output (issue 32 item 6, SPEC.md 20): the client-side decode of 100 documents x
// 256 tokens x 384 float32 (MiniLM's token-state shape, 39.3 MB of floats) as densewire's ragged raw,
// Arrow, MessagePack and Protobuf bodies against TEI's /embed_all JSON ([[[f32]]]) read the usual way
// (TextDecoder + JSON.parse, then the rows into one Float32Array); and 100 sparse vectors of 200
// non-zeros over a vocabulary of 30,522 against TEI's /embed_sparse JSON ([[{index, value}]]) into
// Uint32Array/Float32Array. Side by side in one run, rounds interleaved, best and median.
//
//   cd typescript && npm ci && npm run build && cd .. && node bench/typescript/tokens.mjs [--rounds 7] [--docs 100]
//
// The values are the same synthetic ones in every language's bench (bench/RESULTS-tokens.md): entry e
// is float32(k) / 99991 - 0.5 with k = (e mod 100000) * 35761 mod 100000, computed in float32; TEI's
// JSON holds their shortest float32 decimals (as TEI's serde writes them). `--check` decodes a small
// batch with every decoder, compares it with the JSON bit for bit and exits (typescript/ci.sh runs it).
import os from "node:os";
import { readFileSync } from "node:fs";

const pkg = new URL("../../typescript/", import.meta.url);
const dw = await import(new URL("dist/index.js", pkg).href);
const version = (name) => JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, pkg), "utf8")).version;

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
};
const check = process.argv.includes("--check");
const docs = check ? 3 : arg("--docs", 100);
const tokens = check ? 5 : arg("--tokens", 256);
const d = check ? 7 : arg("--dims", 384);
const nnz = check ? 6 : arg("--nnz", 200);
const rounds = check ? 1 : arg("--rounds", 7);
const VOCAB = 30522;

const kOf = (e) => ((e % 100000) * 35761) % 100000;
const tokValue = (e) => Math.fround(Math.fround(kOf(e) / 99991) - 0.5);
const spValue = (e) => Math.fround(Math.fround(kOf(e) / 99991) * 3);
const spIndex = (i, j) => j * 150 + ((i * 7) % 150);

/** The shortest decimal that reads back as the same float32 (what TEI's serde writes). */
function shortest(x) {
  for (let p = 1; p < 10; p++) {
    const s = Number(x.toPrecision(p));
    if (Math.fround(s) === x) return JSON.stringify(s);
  }
  return JSON.stringify(x);
}
// the values take 100,000 distinct k: their decimals computed once
const tokText = Array.from({ length: 100000 }, (_, k) => shortest(Math.fround(Math.fround(k / 99991) - 0.5)));
const spText = Array.from({ length: 100000 }, (_, k) => shortest(Math.fround(Math.fround(k / 99991) * 3)));

// ---- the bodies
const values = new Float32Array(docs * tokens * d);
for (let e = 0; e < values.length; e++) values[e] = tokValue(e);
const offsets = Uint32Array.from({ length: docs + 1 }, (_, i) => i * tokens);
const ragged = dw.makeRagged("float32", d, offsets, values);
const docsJSON = [];
for (let i = 0; i < docs; i++) {
  const rows = [];
  for (let t = 0; t < tokens; t++) {
    const at = (i * tokens + t) * d;
    const row = new Array(d);
    for (let j = 0; j < d; j++) row[j] = tokText[kOf(at + j)];
    rows.push(`[${row.join(",")}]`);
  }
  docsJSON.push(`[${rows.join(",")}]`);
}
const enc = new TextEncoder();
const teiTokens = enc.encode(`[${docsJSON.join(",")}]`);
docsJSON.length = 0;

const spOffsets = Uint32Array.from({ length: docs + 1 }, (_, i) => i * nnz);
const spIndices = new Uint32Array(docs * nnz);
const spValues = new Float32Array(docs * nnz);
const vectorsJSON = [];
for (let i = 0; i < docs; i++) {
  const entries = [];
  for (let j = 0; j < nnz; j++) {
    const e = i * nnz + j;
    spIndices[e] = spIndex(i, j);
    spValues[e] = spValue(e);
    entries.push(`{"index":${spIndex(i, j)},"value":${spText[kOf(e)]}}`);
  }
  vectorsJSON.push(`[${entries.join(",")}]`);
}
const teiSparse = enc.encode(`[${vectorsJSON.join(",")}]`);
const sparse = dw.makeSparse("float32", VOCAB, spOffsets, spIndices, spValues);

const meta = { model: "bench-model", usage: { prompt_tokens: docs * tokens, total_tokens: docs * tokens } };
const fresh = (b) => b.slice(); // a fresh, aligned buffer, as fetch's arrayBuffer() gives
const rawT = dw.encodeRaggedRaw(ragged, meta);
const rawS = dw.encodeSparseRaw(sparse, meta);
const bodies = {
  tokens: {
    raw: fresh(rawT.body),
    arrow: fresh(await dw.encodeRaggedArrow(ragged, meta)),
    msgpack: fresh(dw.encodeRaggedMsgpack(ragged, meta)),
    protobuf: fresh(dw.encodeRaggedProtobuf(ragged, meta)),
  },
  sparse: {
    raw: fresh(rawS.body),
    arrow: fresh(await dw.encodeSparseArrow(sparse, meta)),
    msgpack: fresh(dw.encodeSparseMsgpack(sparse, meta)),
    protobuf: fresh(dw.encodeSparseProtobuf(sparse, meta)),
  },
};

// ---- the decoders, each ending with the client's natural shape: offsets and one typed array
/** TEI's [[[f32]]] as a client reads it: JSON.parse, then the rows into one Float32Array. */
function parseTEITokens(body) {
  const doc = JSON.parse(new TextDecoder().decode(body));
  const offs = new Uint32Array(doc.length + 1);
  doc.forEach((m, i) => (offs[i + 1] = offs[i] + m.length));
  const width = doc.find((m) => m.length > 0)?.[0].length ?? 0;
  const data = new Float32Array(offs[doc.length] * width);
  let at = 0;
  for (const m of doc) for (const row of m) data.set(row, (at++) * width);
  return { offsets: offs, data };
}
/** TEI's [[{index, value}]] into offsets, a Uint32Array of indices and a Float32Array of values. */
function parseTEISparse(body) {
  const doc = JSON.parse(new TextDecoder().decode(body));
  const offs = new Uint32Array(doc.length + 1);
  doc.forEach((v, i) => (offs[i + 1] = offs[i] + v.length));
  const idx = new Uint32Array(offs[doc.length]);
  const vals = new Float32Array(offs[doc.length]);
  let at = 0;
  for (const v of doc) for (const { index, value } of v) (idx[at] = index), (vals[at++] = value);
  return { offsets: offs, indices: idx, data: vals };
}
const decoders = {
  tokens: {
    "TEI JSON [[[f32]]], JSON.parse + Float32Array": () => parseTEITokens(teiTokens),
    "densewire ragged raw": () => dw.decodeRaggedRaw(bodies.tokens.raw, rawT.headers),
    "densewire ragged Arrow": () => dw.decodeRaggedArrow(bodies.tokens.arrow),
    "densewire ragged MessagePack": () => dw.decodeRaggedMsgpack(bodies.tokens.msgpack),
    "densewire ragged Protobuf": () => dw.decodeRaggedProtobuf(bodies.tokens.protobuf, { message: "RaggedEmbeddingsResponse" }),
  },
  sparse: {
    "TEI JSON [[{index, value}]], JSON.parse + typed arrays": () => parseTEISparse(teiSparse),
    "densewire sparse raw": () => dw.decodeSparseRaw(bodies.sparse.raw, rawS.headers),
    "densewire sparse Arrow": () => dw.decodeSparseArrow(bodies.sparse.arrow),
    "densewire sparse MessagePack": () => dw.decodeSparseMsgpack(bodies.sparse.msgpack),
    "densewire sparse Protobuf": () => dw.decodeSparseProtobuf(bodies.sparse.protobuf, { message: "SparseEmbeddingsResponse" }),
  },
};
const sizes = { tokens: [teiTokens.length, ...Object.values(bodies.tokens).map((b) => b.length)], sparse: [teiSparse.length, ...Object.values(bodies.sparse).map((b) => b.length)] };
const bodyOf = { tokens: [teiTokens, ...Object.values(bodies.tokens)], sparse: [teiSparse, ...Object.values(bodies.sparse)] };

const bits = (a) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.byteLength / 4));
if (check) {
  for (const kind of ["tokens", "sparse"]) {
    const fns = Object.entries(decoders[kind]);
    const want = await fns[0][1]();
    for (const [name, fn] of fns.slice(1)) {
      const got = await fn();
      const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
      if (!same(Array.from(got.offsets), Array.from(want.offsets)) || !same(bits(got.data), bits(want.data)) || (kind === "sparse" && !same(Array.from(got.indices), Array.from(want.indices)))) {
        console.error(`tokens.mjs --check: ${name} differs from TEI's JSON`);
        process.exit(1);
      }
    }
  }
  console.log("tokens.mjs --check: every ragged and sparse body decodes to TEI's JSON, bit for bit");
  process.exit(0);
}

// ---- rounds interleaved: each round runs every decoder once; under 1 ms, a batch of calls a round
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = {};
for (const kind of ["tokens", "sparse"]) {
  const fns = Object.entries(decoders[kind]);
  const times = fns.map(() => []);
  const calls = [];
  const result = [];
  for (let r = -2; r < rounds; r++) {
    for (let i = 0; i < fns.length; i++) {
      const n = calls[i] ?? 1;
      let out;
      const t0 = performance.now();
      for (let k = 0; k < n; k++) out = await fns[i][1]();
      const t1 = performance.now();
      if (r >= 0) times[i].push((t1 - t0) / n);
      else if (r === -1) (calls[i] = t1 - t0 < 1 ? 200 : 1), (result[i] = out.data.buffer === bodyOf[kind][i].buffer ? "view" : "copy");
    }
  }
  results[kind] = fns.map(([name], i) => ({ name, bytes: sizes[kind][i], best: Math.min(...times[i]), median: median(times[i]), result: result[i], calls: calls[i] }));
}

const ms = (x) => (x < 0.01 ? x.toFixed(4) : x < 1 ? x.toFixed(3) : x.toFixed(1));
const ratio = (a, b) => (a / b >= 100 ? Math.round(a / b).toLocaleString("en") : (a / b).toFixed(1));
console.log(`densewire TypeScript per-token/sparse decode: ${docs} x ${tokens} x ${d} float32; sparse ${docs} x ${nnz} of ${VOCAB}`);
console.log(`node ${process.version} (V8 ${process.versions.v8}), ${os.cpus()[0]?.model ?? "?"} x ${os.cpus().length}, apache-arrow ${version("apache-arrow")}, @msgpack/msgpack ${version("@msgpack/msgpack")}, @bufbuild/protobuf ${version("@bufbuild/protobuf")}`);
console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(" / ")}; ${rounds} interleaved rounds after 2 warm-up rounds; decoders under 1 ms timed over 200 calls a round`);
for (const kind of ["tokens", "sparse"]) {
  const [base, ...rest] = results[kind];
  console.log("");
  console.log("| decoder | bytes | x TEI bytes | best ms | median ms | x JSON (best) | x JSON (median) | result |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---|");
  for (const r of [base, ...rest]) {
    console.log(`| ${r.name} | ${r.bytes.toLocaleString("en")} | ${(r.bytes / base.bytes).toFixed(3)} | ${ms(r.best)} | ${ms(r.median)} | ${ratio(base.best, r.best)} | ${ratio(base.median, r.median)} | ${r.result} |`);
  }
}
