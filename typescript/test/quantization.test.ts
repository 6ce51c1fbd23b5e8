/**
 * Quantized embeddings: the rule's edge cases (bounds, clamping, NaN, infinities, -0.0, a zero step,
 * ties of the float32 rounding), the quantization id, the published object, every codec carrying the
 * id, and the client's dequantize option against the fake server.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import {
  type Embeddings,
  type Format,
  DensewireClient,
  decodeArrow,
  decodeJSON,
  decodeMsgpack,
  decodeProtobuf,
  decodeRaw,
  dequantize,
  encodeArrow,
  encodeJSON,
  encodeMsgpack,
  encodeProtobuf,
  encodeRaw,
  makeTensor,
  parseQuantization,
  quantizationId,
  quantize,
} from "../src/index.js";
import { sha256Hex } from "../src/quantization.js";
import { assertDensewireError, tensorItems } from "./helpers.js";
import { CALIBRATION, type FakeServer, fakeEmbedding, quantizationObject, startFakeServer } from "./server.js";

const f32 = (...v: number[]) => Float32Array.from(v);
const rows = (d: number, ...v: number[]) => makeTensor("float32", [v.length / d, d], f32(...v));
const bits = (x: number) => new Uint32Array(f32(x).buffer)[0]!;

describe("quantize", () => {
  // lower 0, upper 255: step is exactly 1, so every code below is exact arithmetic
  const lower = f32(0, -1, 2);
  const upper = f32(255, 254, 2);

  it("floors (x - lower) / step and clamps to 0..255", () => {
    const t = rows(3, 0, -1, 2, 255, 254, 2, 3.99, 0.5, 1, -7, -300, 1e30, 300, 1e9, -1e9);
    const u = quantize(t, lower, upper, "uint8");
    assert.equal(u.dtype, "uint8");
    assert.deepEqual(u.shape, [5, 3]);
    // x == lower: 0; x == upper: 255; a zero step (lower == upper == 2): 0 at or below lower, 255 above
    assert.deepEqual(Array.from(u.data), [0, 0, 0, 255, 255, 0, 3, 1, 0, 0, 0, 255, 255, 255, 0]);
  });

  it("maps NaN to 0, +Infinity to 255, -Infinity to 0, -0.0 like 0", () => {
    const t = rows(3, NaN, NaN, NaN, Infinity, Infinity, Infinity, -Infinity, -Infinity, -Infinity, -0, -0, -0);
    assert.deepEqual(Array.from(quantize(t, lower, upper, "uint8").data), [0, 0, 0, 255, 255, 255, 0, 0, 0, 0, 1, 0]);
  });

  it("writes int8 as the uint8 code minus 128", () => {
    const t = rows(3, 0, 100, 2, 255, 254, 3, 127.5, 127, 1);
    const u = quantize(t, { lower, upper }, "uint8");
    const i = quantize(t, { lower, upper }, "int8");
    assert.equal(i.dtype, "int8");
    assert.deepEqual(Array.from(i.data), Array.from(u.data, (x) => x - 128));
    assert.deepEqual(Array.from(i.data), [-128, -27, -128, 127, 127, 127, -1, 0, -128]);
  });

  it("rejects what it cannot quantize, naming the field", () => {
    const t = rows(3, 0, 0, 0);
    assertDensewireError(() => quantize(makeTensor("float16", [1, 3], new Uint16Array(3)), lower, upper, "int8"), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => quantize(t, lower, upper, "binary" as "int8"), { category: "invalid_field", field: "dtype" });
    assertDensewireError(() => quantize(t, f32(0, 0), f32(1, 1), "int8"), { category: "shape_mismatch", field: "lower" });
    assertDensewireError(() => quantize(t, f32(0, 0, 0), f32(1, -1, 1), "int8"), { category: "invalid_field", field: "upper[1]" });
    assertDensewireError(() => quantize(t, f32(0, NaN, 0), f32(1, 1, 1), "int8"), { category: "invalid_field", field: "lower[1]" });
    assertDensewireError(() => quantize(t, f32(0, 0, 0), f32(1, 1, Infinity), "int8"), { category: "invalid_field", field: "upper[2]" });
  });
});

describe("dequantize", () => {
  it("gives the middle of each code's interval: lower + (u + 0.5) * step", () => {
    const codes = makeTensor("uint8", [2, 2], Uint8Array.from([0, 255, 3, 128]));
    const out = dequantize(codes, f32(0, -255), f32(255, 0));
    assert.equal(out.dtype, "float32");
    assert.deepEqual(Array.from(out.data), [0.5, 0.5, 3.5, -126.5]);
    const signed = makeTensor("int8", [2, 2], Int8Array.from([-128, 127, -125, 0]));
    assert.deepEqual(Array.from(dequantize(signed, { lower: f32(0, -255), upper: f32(255, 0) }).data), [0.5, 0.5, 3.5, -126.5]);
  });

  it("gives lower itself where the step is 0, -0.0 included", () => {
    const codes = makeTensor("uint8", [1, 3], Uint8Array.from([0, 200, 255]));
    const out = dequantize(codes, f32(-0, 7, 1), f32(-0, 7, 1));
    assert.ok(Object.is(out.data[0], -0));
    assert.deepEqual(Array.from(out.data), [-0, 7, 1]);
  });

  it("rounds the binary64 value to float32 with ties to even", () => {
    // lower 1, step 2^-23 (one float32 ulp at 1): 1 + (u + 0.5) * 2^-23 is halfway between two
    // float32 values, and rounds to the one with an even significand
    const ulp = 2 ** -23;
    const codes = makeTensor("uint8", [1, 4], Uint8Array.from([0, 1, 2, 254]));
    const out = dequantize(codes, f32(1, 1, 1, 1), f32(1 + 255 * ulp, 1 + 255 * ulp, 1 + 255 * ulp, 1 + 255 * ulp));
    assert.deepEqual(Array.from(out.data, bits), [bits(1), bits(1 + 2 * ulp), bits(1 + 2 * ulp), bits(1 + 254 * ulp)]);
  });

  it("undoes quantize to within half a step", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.array(fc.float({ min: -4, max: 4, noNaN: true }), { minLength: 18, maxLength: 18 }),
        fc.array(fc.float({ min: -8, max: 8, noNaN: true }), { minLength: 9, maxLength: 9 }),
        (d, bounds, xs) => {
          const lower = Float32Array.from({ length: d }, (_, j) => Math.min(bounds[2 * j]!, bounds[2 * j + 1]!));
          const upper = Float32Array.from({ length: d }, (_, j) => Math.max(bounds[2 * j]!, bounds[2 * j + 1]!));
          const x = Float32Array.from(xs.slice(0, d), (v, j) => Math.min(Math.max(v, lower[j]!), upper[j]!));
          const t = makeTensor("float32", [1, d], x);
          for (const dtype of ["int8", "uint8"] as const) {
            const back = dequantize(quantize(t, lower, upper, dtype), lower, upper);
            for (let j = 0; j < d; j++) {
              const step = (upper[j]! - lower[j]!) / 255;
              // half a step, plus the float32 rounding of the result (half an ulp of it)
              const slack = step / 2 + Math.abs(back.data[j]!) * 2 ** -24 + 2 ** -150;
              assert.ok(Math.abs(back.data[j]! - x[j]!) <= slack, `${x[j]} -> ${back.data[j]} (step ${step})`);
            }
          }
        },
      ),
    );
  });

  it("keeps model and usage, not the codes' quantization id", () => {
    const codes: Embeddings = { ...makeTensor("int8", [1, 1], Int8Array.from([0])), model: "m", usage: { prompt_tokens: 1, total_tokens: 1 }, quantization: "0123456789abcdef" };
    const out = dequantize(codes as Embeddings<"int8">, f32(0), f32(1));
    assert.equal(out.model, "m");
    assert.deepEqual(out.usage, { prompt_tokens: 1, total_tokens: 1 });
    assert.equal(out.quantization, undefined);
  });

  it("rejects other dtypes and ranges of another width", () => {
    assertDensewireError(() => dequantize(rows(1, 0) as never, f32(0), f32(1)), { category: "invalid_field", field: "dtype" });
    const codes = makeTensor("uint8", [1, 2], Uint8Array.from([0, 1]));
    assertDensewireError(() => dequantize(codes, f32(0), f32(1)), { category: "shape_mismatch", field: "lower" });
    assertDensewireError(() => dequantize(codes, f32(0, 0), f32(1)), { category: "shape_mismatch", field: "upper" });
  });
});

describe("quantization id", () => {
  it("is sha256(lower LE || upper LE || decimal d), 16 hex digits", () => {
    const lower = f32(-0.5, -0, 1e-45);
    const upper = f32(0.5, 0, 3.4028234663852886e38);
    const h = createHash("sha256");
    h.update(Buffer.from(lower.buffer));
    h.update(Buffer.from(upper.buffer));
    h.update("3");
    assert.equal(quantizationId(lower, upper), h.digest("hex").slice(0, 16));
    assert.equal(quantizationId([], []), createHash("sha256").update("0").digest("hex").slice(0, 16));
    assert.notEqual(quantizationId(f32(0), f32(-0)), quantizationId(f32(0), f32(0)));
  });

  it("uses a SHA-256 equal to node:crypto's at every block boundary", () => {
    for (const len of [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000, 4099]) {
      const bytes = Uint8Array.from({ length: len }, (_, i) => (i * 131 + len) & 0xff);
      assert.equal(sha256Hex(bytes), createHash("sha256").update(bytes).digest("hex"), `length ${len}`);
    }
  });
});

describe("parseQuantization", () => {
  const lower = f32(-0.25, -1, 0);
  const upper = f32(0.75, 1, 0);
  const id = quantizationId(lower, upper);
  const obj = () => quantizationObject({ id, lower, upper }) as Record<string, unknown>;

  it("reads the published object and checks its id", () => {
    const q = parseQuantization(obj());
    assert.equal(q.id, id);
    assert.equal(q.method, "minmax-per-dimension");
    assert.equal(q.dimensions, 3);
    assert.deepEqual(Array.from(q.lower), Array.from(lower));
    assert.deepEqual(Array.from(q.upper), Array.from(upper));
    assert.deepEqual(q.calibration, { name: "fake", texts: CALIBRATION.length, sha256: "0".repeat(64) });
    assert.equal(parseQuantization(JSON.stringify(obj())).id, id);
  });

  it("names the field of every error, in the order of SPEC.md 17.6", () => {
    const bad = (patch: Record<string, unknown>) => ({ ...obj(), ...patch });
    assertDensewireError(() => parseQuantization([]), { category: "malformed" });
    assertDensewireError(() => parseQuantization("{"), { category: "malformed" });
    assertDensewireError(() => parseQuantization(bad({ id: 7, dimensions: "x" })), { category: "invalid_field", field: "id" });
    assertDensewireError(() => parseQuantization(bad({ id: "ABC" })), { category: "invalid_field", field: "id" });
    assertDensewireError(() => parseQuantization(bad({ id: "0123456789abcdef" })), { category: "invalid_field", field: "id" });
    assertDensewireError(() => parseQuantization(bad({ method: "absmax" })), { category: "invalid_field", field: "method" });
    assertDensewireError(() => parseQuantization(bad({ dimensions: -1 })), { category: "invalid_field", field: "dimensions" });
    assertDensewireError(() => parseQuantization(bad({ dimensions: 4, upper: 5 })), { category: "invalid_field", field: "upper" });
    assertDensewireError(() => parseQuantization(bad({ dimensions: 4 })), { category: "length_mismatch", field: "lower", offset: 12 });
    assertDensewireError(() => parseQuantization(bad({ upper: "AAAA*AAA" })), { category: "invalid_base64", field: "upper", offset: 4 });
    assertDensewireError(() => parseQuantization(bad({ lower: undefined })), { category: "invalid_field", field: "lower" });
    const swapped = quantizationObject({ id: quantizationId(upper, lower), lower: upper, upper: lower });
    assertDensewireError(() => parseQuantization(swapped), { category: "invalid_field", field: "upper[0]" });
    assertDensewireError(() => parseQuantization(swapped, "data[0].quantization."), { category: "invalid_field", field: "data[0].quantization.upper[0]" });
  });
});

describe("codecs carry the quantization id", () => {
  const id = "0123456789abcdef";
  const codes: Embeddings = { ...makeTensor("int8", [2, 3], Int8Array.from([-128, 0, 127, 5, -5, 1])), model: "m", usage: { prompt_tokens: 2, total_tokens: 2 }, quantization: id };
  const check = (e: Embeddings) => {
    assert.equal(e.quantization, id);
    assert.deepEqual(tensorItems(e), tensorItems(codes));
  };

  it("JSON envelope (numbers and Base64): the key after dimensions", () => {
    for (const encodingFormat of ["float", "base64"] as const) {
      const text = encodeJSON(codes, { encodingFormat });
      assert.match(text, /"dimensions":3,"quantization":"0123456789abcdef"}$/);
      check(decodeJSON(text));
    }
    assert.equal(decodeJSON(encodeJSON({ ...codes, quantization: undefined })).quantization, undefined);
  });

  it("raw: the Densewire-Quantization header", () => {
    const { body, headers } = encodeRaw(codes);
    assert.equal(headers["Densewire-Quantization"], id);
    check(decodeRaw(body, headers));
    check(decodeRaw(body, new Headers({ ...headers, "Densewire-Quantization": ` ${id} ` })));
  });

  it("MessagePack: the key quantization after usage", () => {
    const body = encodeMsgpack(codes);
    const tail = Buffer.from(body.subarray(body.length - 30)).toString("latin1");
    assert.ok(tail.endsWith(`\xacquantization\xb0${id}`), tail);
    check(decodeMsgpack(body));
  });

  it("Protobuf: EmbeddingsResponse field 4", () => {
    const body = encodeProtobuf(codes);
    assert.deepEqual(Array.from(body.subarray(body.length - 18)), [0x22, 16, ...Buffer.from(id)]);
    check(decodeProtobuf(body, { message: "EmbeddingsResponse" }));
    // field 4 with the varint wire type is malformed at its tag
    const bad = Uint8Array.from([...encodeProtobuf({ ...codes, quantization: undefined }), 0x20, 0x01]);
    assertDensewireError(() => decodeProtobuf(bad, { message: "EmbeddingsResponse" }), { category: "malformed", field: "quantization", offset: bad.length - 2 });
  });

  it("Arrow: schema metadata densewire.quantization", async () => {
    check(await decodeArrow(await encodeArrow(codes)));
  });

  it("is written whatever the dtype, and must be a string", async () => {
    // servers give it for int8/uint8 only; encoders write what they are given (SPEC.md 17.5)
    const floats: Embeddings = { ...makeTensor("float32", [1, 1], f32(1)), quantization: id };
    assert.equal(decodeJSON(encodeJSON(floats)).quantization, id);
    const raw = encodeRaw(floats);
    assert.equal(decodeRaw(raw.body, raw.headers).quantization, id);
    assert.equal(decodeMsgpack(encodeMsgpack(floats)).quantization, id);
    assert.equal(decodeProtobuf(encodeProtobuf(floats), { message: "EmbeddingsResponse" }).quantization, id);
    assert.equal((await decodeArrow(await encodeArrow(floats))).quantization, id);
    // a Tensor message has no field for it (nor for model and usage)
    assert.equal(decodeProtobuf(encodeProtobuf(codes, { message: "Tensor" })).quantization, undefined);
    const notString = encodeJSON(codes).replace(`"${id}"`, "7");
    assertDensewireError(() => decodeJSON(notString), { category: "invalid_field", field: "quantization" });
    assertDensewireError(() => encodeJSON({ ...codes, quantization: 7 as unknown as string }), { category: "invalid_field", field: "quantization" });
  });
});

describe("client: dtype int8/uint8 with dequantize", () => {
  let server: FakeServer;
  before(async () => {
    server = await startFakeServer({ dimensions: 64 });
  });
  after(() => server.close());
  const texts = ["a cat", "a dog sleeps", CALIBRATION[3]!];

  for (const format of ["raw", "msgpack", "protobuf", "arrow", "json"] as Format[]) {
    it(`reads the id from ${format} and dequantizes with the published ranges, fetched once`, async () => {
      const client = new DensewireClient({ baseURL: server.url, formats: [format] });
      const before = server.quantizationRequests.length;
      for (const dtype of ["int8", "uint8"] as const) {
        const codes = await client.embed(texts, { dtype, dimensions: 48 });
        assert.equal(codes.dtype, dtype);
        assert.match(codes.quantization ?? "", /^[0-9a-f]{16}$/);
        const floats = await client.embed(texts, { dtype, dimensions: 48, dequantize: true });
        const again = await client.embed(texts, { dtype, dimensions: 48, dequantize: true });
        assert.equal(floats.dtype, "float32");
        assert.deepEqual(floats.shape, [3, 48]);
        assert.deepEqual(tensorItems(again), tensorItems(floats));
        const q = await client.quantization(codes.quantization!);
        assert.deepEqual(tensorItems(floats), tensorItems(dequantize(codes as Embeddings<"int8">, q)));
        // within half a step of the server's float32 values (the third text is in the calibration set)
        const x = fakeEmbedding(texts[2]!, 64);
        for (let j = 0; j < 48; j++) {
          const step = (q.upper[j]! - q.lower[j]!) / 255;
          assert.ok(Math.abs(floats.data[2 * 48 + j]! - x[j]!) <= step / 2 + 1e-7, `dimension ${j}`);
        }
      }
      // one GET /v1/quantization/{id} per id (the d = 48 ranges: one id for int8 and uint8)
      assert.equal(server.quantizationRequests.length - before, 1);
    });
  }

  it("refuses dequantize without an int8/uint8 dtype, and a response without an id", async () => {
    const client = new DensewireClient({ baseURL: server.url });
    await assert.rejects(client.embed(texts, { dequantize: true }), /dequantize needs dtype "int8" or "uint8"/);
    const bare = new DensewireClient({
      baseURL: server.url,
      fetch: async (url, init) => {
        const r = await fetch(url, init);
        const headers = new Headers(r.headers);
        headers.delete("densewire-quantization");
        return new Response(await r.arrayBuffer(), { status: r.status, headers });
      },
      formats: ["raw"],
    });
    await assert.rejects(bare.embed(texts, { dtype: "int8", dequantize: true }), (e: unknown) => (e as { field?: string }).field === "quantization");
  });

  it("embedMany dequantizes every batch with one fetch of the ranges", async () => {
    const client = new DensewireClient({ baseURL: server.url });
    const many = Array.from({ length: 10 }, (_, i) => `text ${i}`);
    const before = server.quantizationRequests.length;
    const out = await client.embedMany(many, { dtype: "uint8", dequantize: true, dimensions: 40, batchSize: 3, concurrency: 2 });
    assert.equal(out.dtype, "float32");
    assert.deepEqual(out.shape, [10, 40]);
    assert.equal(server.quantizationRequests.length - before, 1);
    const codes = await client.embedMany(many, { dtype: "uint8", dimensions: 40, batchSize: 3 });
    assert.equal(codes.dtype, "uint8");
    assert.match(codes.quantization ?? "", /^[0-9a-f]{16}$/);
  });
});
