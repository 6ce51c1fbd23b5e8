// Manual interop check (not part of ci.sh): this client against a running `densewire serve`.
//
//   (cd ../python && python -m densewire serve --model hash:384 --port 18765) &
//   npm run build && node scripts/interop-python-server.mjs http://127.0.0.1:18765/v1
//
// For each dtype the server produces, asks for every format and checks that all five decode to the
// same bits; then JSON float vs big-endian Base64, the error envelopes, and embedMany.
import assert from "node:assert/strict";

const dw = await import(new URL("../dist/index.js", import.meta.url).href);
const base = process.argv[2] ?? "http://127.0.0.1:8000/v1";
const texts = ["a cat", "a dog sleeps", "the quick brown fox"];
const hex = (t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("hex");

for (const dtype of ["float32", "float16", "bfloat16", "binary"]) {
  const seen = new Map();
  for (const format of ["raw", "msgpack", "protobuf", "arrow", "json"]) {
    const client = new dw.DensewireClient({ baseURL: base, formats: [format] });
    const response = await fetch(`${base}/embeddings`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: dw.acceptHeader([format]) },
      body: JSON.stringify({ input: texts, encoding_format: "base64", ...(dtype === "float32" ? {} : { dtype }) }),
    });
    assert.equal(dw.formatOfContentType(response.headers.get("content-type")), format, `${dtype}: Content-Type`);
    const e = await dw.decodeResponse(response);
    assert.equal(e.dtype, dtype);
    seen.set(format, hex(e));
    assert.equal(hex(await client.embed(texts, { dtype })), hex(e), `${dtype} ${format}: client`);
  }
  assert.equal(new Set(seen.values()).size, 1, `${dtype}: all formats give the same bits`);
  console.log(`${dtype}: raw, msgpack, protobuf, arrow, json decode to the same bits`);
}

const post = (body) => fetch(`${base}/embeddings`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
const f = await dw.decodeResponse(await post({ input: texts, encoding_format: "float", dtype: "float16" }));
const b = await dw.decodeResponse(await post({ input: texts, encoding_format: "base64", dtype: "float16", byteorder: "big" }));
assert.equal(hex(f), hex(b));
console.log("JSON float numbers and big-endian Base64 give the same float16 bits");

const client = new dw.DensewireClient({ baseURL: base });
await assert.rejects(client.embed(texts, { dtype: "float8" }), { name: "DensewireHTTPError", status: 400, code: "unknown_dtype", param: "dtype" });
await assert.rejects(client.embed([""]), { name: "DensewireHTTPError", status: 422, code: "invalid_field", param: "input[0]" });
console.log("error envelopes arrive as DensewireHTTPError with code and param");

const many = await client.embedMany(Array.from({ length: 2000 }, (_, i) => `doc ${i}`), { batchSize: 128, concurrency: 4 });
assert.deepEqual(many.shape.slice(0, 1), [2000]);
console.log(`embedMany: ${many.shape.join(" x ")}, usage ${JSON.stringify(many.usage)}`);
