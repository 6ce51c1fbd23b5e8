/**
 * The golden vectors (SPEC.md section 13): every case of testdata/golden/{tensors,conversions,invalid,
 * interop,quantization}.json that TypeScript claims (capabilities.json), one test per case id. A
 * claimed case this library could not handle fails here; the unclaimed ones are listed in the output
 * (capabilities.ts).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ByteOrder,
  type Embeddings,
  type Tensor,
  type Usage,
  decodeArrow,
  decodeBase64,
  decodeJSON,
  decodeKServe,
  decodeMsgpack,
  decodeProtobuf,
  decodeRaw,
  encodeArrow,
  encodeBase64,
  encodeJSON,
  encodeMsgpack,
  encodeProtobuf,
  encodeRaw,
  float32BitsToBfloat16Bits,
  float32BitsToFloat16Bits,
  float32ToBfloat16,
  float32ToBinary,
  float32ToFloat16,
  float64ToFloat32,
  float64ToFloat32Bits,
  type ProtobufMessage,
  cohereBinary,
  dequantize,
  fromCohereBinary,
  makeTensor,
  parseQuantization,
  quantizationId,
  quantize,
} from "../src/index.js";
import {
  type GoldenCase,
  assertDensewireError,
  assertDensewireErrorAsync,
  assertTensor,
  fromHex,
  loadGolden,
  tensorOf,
  toHex,
} from "./helpers.js";
import { claimedCases } from "./capabilities.js";

const hex = (c: GoldenCase) => fromHex(c["encoded_hex"] as string);
const text = (c: GoldenCase) => c["encoded_text"] as string;

function assertEnvelope(decoded: Embeddings, c: GoldenCase): void {
  if ("model" in c) assert.equal(decoded.model, c["model"], "model");
  if ("usage" in c) assert.deepEqual(decoded.usage, c["usage"], "usage");
  assert.equal(decoded.quantization, c["quantization"], "quantization");
}

async function checkValid(c: GoldenCase): Promise<void> {
  const exact = c["byte_exact"] === true;
  const meta: { model?: string; usage?: Usage; quantization?: string } = {};
  if ("model" in c) meta.model = c["model"] as string;
  if ("usage" in c) meta.usage = c["usage"] as Usage;
  if ("quantization" in c) meta.quantization = c["quantization"] as string;
  const tensor: Tensor = tensorOf(c);
  const byteorder = c["byteorder"] as ByteOrder;
  switch (c["format"]) {
    case "base64": {
      assertTensor(decodeBase64(text(c), { dtype: c["dtype"] as string, shape: c["shape"] as number[], byteorder }), c);
      const ours = encodeBase64(tensor, { byteorder });
      if (exact) assert.equal(ours, text(c), "encoded_text");
      assertTensor(decodeBase64(ours, { dtype: c["dtype"] as string, shape: c["shape"] as number[], byteorder }), c);
      return;
    }
    case "raw": {
      const decoded = decodeRaw(hex(c), c["headers"] as Record<string, string>);
      assertTensor(decoded, c);
      assertEnvelope(decoded, c);
      const ours = encodeRaw(tensor, meta);
      if (exact) {
        assert.equal(toHex(ours.body), c["encoded_hex"], "encoded_hex");
        assert.deepEqual(ours.headers, c["headers"], "headers");
      }
      assertTensor(decodeRaw(ours.body, ours.headers), c);
      return;
    }
    case "msgpack": {
      const decoded = decodeMsgpack(hex(c));
      assertTensor(decoded, c);
      assertEnvelope(decoded, c);
      const ours = encodeMsgpack(tensor, meta);
      if (exact) assert.equal(toHex(ours), c["encoded_hex"], "encoded_hex");
      assertTensor(decodeMsgpack(ours), c);
      return;
    }
    case "protobuf": {
      const message = c["message"] as ProtobufMessage;
      const decoded = decodeProtobuf(hex(c), { message });
      assertTensor(decoded, c);
      assertEnvelope(decoded, c);
      const ours = encodeProtobuf(tensor, { message, ...meta });
      if (exact) assert.equal(toHex(ours), c["encoded_hex"], "encoded_hex");
      assertTensor(decodeProtobuf(ours, { message }), c);
      return;
    }
    case "arrow": {
      const decoded = await decodeArrow(hex(c));
      assertTensor(decoded, c);
      assertEnvelope(decoded, c);
      const ours = await encodeArrow(tensor, meta);
      if (exact) assert.equal(toHex(ours), c["encoded_hex"], "encoded_hex");
      const back = await decodeArrow(ours);
      assertTensor(back, c);
      assertEnvelope(back, c);
      return;
    }
    case "json": {
      const decoded = decodeJSON(text(c));
      assertTensor(decoded, c);
      assertEnvelope(decoded, c);
      const encodingFormat = (c["encoding_format"] as "float" | "base64" | undefined) ?? (typeof text(c) === "string" && /"embedding"\s*:\s*"/.test(text(c)) ? "base64" : "float");
      const ours = encodeJSON(tensor, { encodingFormat, byteorder, ...meta });
      if (exact) assert.equal(ours, text(c), "encoded_text");
      const back = decodeJSON(ours);
      assertTensor(back, c);
      assertEnvelope(back, c);
      return;
    }
    default:
      assert.fail(`format ${String(c["format"])} is not supported by this library`);
  }
}

async function checkInvalid(c: GoldenCase): Promise<void> {
  const expected = { category: c["error"] as string, offset: c["offset"] as number | undefined, field: c["field"] as string | undefined };
  const input = () => ("input_hex" in c ? fromHex(c["input_hex"] as string) : (c["input_text"] as string));
  if (c["direction"] === "encode") {
    assert.equal(c["format"], "json", "encode-direction cases are JSON");
    const t = tensorOf(c);
    assertDensewireError(() => encodeJSON(t, { encodingFormat: c["encoding_format"] as "float" | "base64" }), expected);
    return;
  }
  switch (c["format"]) {
    case "base64":
      assertDensewireError(
        () => decodeBase64(input() as string, { dtype: c["dtype"] as string, shape: c["shape"] as number[], byteorder: c["byteorder"] as string }),
        expected,
      );
      return;
    case "raw":
      assertDensewireError(() => decodeRaw(input() as Uint8Array, c["headers"] as Record<string, string>), expected);
      return;
    case "msgpack":
      assertDensewireError(() => decodeMsgpack(input() as Uint8Array), expected);
      return;
    case "protobuf":
      assertDensewireError(() => decodeProtobuf(input() as Uint8Array, { message: c["message"] as ProtobufMessage }), expected);
      return;
    case "json":
      assertDensewireError(() => decodeJSON(input()), expected);
      return;
    case "arrow":
      await assertDensewireErrorAsync(() => decodeArrow(input() as Uint8Array), expected);
      return;
    default:
      assert.fail(`format ${String(c["format"])} is not supported by this library`);
  }
}

function f32(bits: readonly string[]): Float32Array {
  return new Float32Array(Uint32Array.from(bits, (h) => parseInt(h, 16)).buffer);
}

function checkConversion(c: GoldenCase): void {
  const input = c["input"] as string[];
  const output = c["output"] as string[];
  const pair = `${c["from"]}->${c["to"]}`;
  const hex16 = (a: Uint16Array) => Array.from(a, (x) => x.toString(16).padStart(4, "0"));
  switch (pair) {
    case "float32->float16":
      assert.deepEqual(input.map((h) => float32BitsToFloat16Bits(parseInt(h, 16)).toString(16).padStart(4, "0")), output);
      assert.deepEqual(hex16(float32ToFloat16(f32(input))), output, "bulk");
      return;
    case "float32->bfloat16":
      assert.deepEqual(input.map((h) => float32BitsToBfloat16Bits(parseInt(h, 16)).toString(16).padStart(4, "0")), output);
      assert.deepEqual(hex16(float32ToBfloat16(f32(input))), output, "bulk");
      return;
    case "float32->binary":
      assert.deepEqual(Array.from(float32ToBinary(f32(input), c["shape"] as [number, number]), (x) => x.toString(16).padStart(2, "0")), output);
      return;
    case "float64->float32": {
      const values = new Float64Array(new BigUint64Array(input.map((h) => BigInt("0x" + h))).buffer);
      assert.deepEqual(Array.from(values, (v) => float64ToFloat32Bits(v).toString(16).padStart(8, "0")), output);
      const bulk = new Uint32Array(float64ToFloat32(values).buffer);
      assert.deepEqual(Array.from(bulk, (x) => x.toString(16).padStart(8, "0")), output, "bulk");
      return;
    }
    default:
      assert.fail(`conversion ${pair} is not supported by this library`);
  }
}

/** float32 bits (hex) as a Float32Array, NaN payloads kept. */
function f32Items(items: unknown): Float32Array {
  return f32(items as string[]);
}

function f32Hex(a: Float32Array): string[] {
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length), (x) => x.toString(16).padStart(8, "0"));
}

function byteHex(a: Uint8Array | Int8Array): string[] {
  return Array.from(new Uint8Array(a.buffer, a.byteOffset, a.length), (x) => x.toString(16).padStart(2, "0"));
}

/** quantization.json (SPEC.md section 17.7): one check per `operation`, the invalid cases by their error. */
async function checkQuantization(c: GoldenCase): Promise<void> {
  const shape = c["shape"] as [number, number];
  const lower = () => f32Items(c["lower"]);
  const upper = () => f32Items(c["upper"]);
  const codesOf = () => {
    const bytes = fromHex((c["codes"] as string[]).join(""));
    return c["dtype"] === "int8" ? makeTensor("int8", shape, new Int8Array(bytes.buffer)) : makeTensor("uint8", shape, bytes);
  };
  if ("error" in c) {
    const expected = { category: c["error"] as string, offset: c["offset"] as number | undefined, field: c["field"] as string | undefined };
    switch (c["operation"]) {
      case "quantize":
        assertDensewireError(() => quantize(makeTensor("float32", shape, f32Items(c["input"])), lower(), upper(), "int8"), expected);
        return;
      case "dequantize":
        assertDensewireError(() => dequantize(codesOf(), lower(), upper()), expected);
        return;
      case "id":
        assertDensewireError(() => parseQuantization(c["input_text"] as string), expected);
        return;
      default:
        return checkInvalid(c);
    }
  }
  switch (c["operation"]) {
    case "quantize": {
      const t = makeTensor("float32", shape, f32Items(c["input"]));
      assert.deepEqual(byteHex(quantize(t, lower(), upper(), "uint8").data), c["uint8"], "uint8");
      assert.deepEqual(byteHex(quantize(t, { lower: lower(), upper: upper() }, "int8").data), c["int8"], "int8");
      return;
    }
    case "dequantize": {
      const out = dequantize(codesOf(), lower(), upper());
      assert.deepEqual(out.shape, shape);
      assert.deepEqual(f32Hex(out.data), c["output"]);
      return;
    }
    case "id": {
      assert.equal(quantizationId(lower(), upper()), c["quantization"]);
      const q = parseQuantization(c["encoded_text"] as string);
      assert.equal(q.id, c["quantization"]);
      assert.equal(q.dimensions, c["dimensions"]);
      assert.deepEqual(f32Hex(q.lower), c["lower"]);
      assert.deepEqual(f32Hex(q.upper), c["upper"]);
      return;
    }
    case "binary": {
      const packed = float32ToBinary(f32Items(c["input"]), shape);
      assert.deepEqual(byteHex(packed), c["binary"], "binary");
      const cohere = cohereBinary(makeTensor("binary", shape, packed));
      assert.deepEqual(Array.from(cohere, String), c["cohere_binary"], "cohere_binary");
      assert.deepEqual(byteHex(fromCohereBinary(cohere)), c["binary"], "fromCohereBinary");
      return;
    }
    case "envelope":
      return checkValid(c);
    default:
      assert.fail(`operation ${String(c["operation"])} is not supported by this library`);
  }
}

/** kserve.json (SPEC.md 19.6): the reader's outputs, or its error; kserve_request cases are a server's (not claimed). */
function checkKServe(c: GoldenCase): void {
  const headers = c["headers"] as Record<string, string>;
  if ("error" in c) {
    const expected = { category: c["error"] as string, offset: c["offset"] as number | undefined, field: c["field"] as string | undefined };
    assertDensewireError(() => decodeKServe(fromHex(c["input_hex"] as string), headers), expected);
    return;
  }
  const body = fromHex(c["encoded_hex"] as string);
  const r = decodeKServe(body, headers);
  assert.equal(r.modelName, c["model_name"], "model_name");
  assert.equal(r.modelVersion, c["model_version"], "model_version");
  assert.equal(r.id, c["response_id"], "id");
  const expected = c["outputs"] as GoldenCase[];
  let blobAt = Number(Object.entries(headers).find(([k]) => k.toLowerCase() === "inference-header-content-length")?.[1] ?? body.length);
  assert.deepEqual([...r.outputs.keys()], expected.map((o) => o["name"]), "output names in order");
  for (const o of expected) {
    const out = r.outputs.get(o["name"] as string)!;
    const start = blobAt;
    if (out.binary) blobAt += out.parameters["binary_data_size"] as number;
    assert.equal(out.datatype, o["datatype"], "datatype");
    assert.deepEqual(out.shape, o["shape"], "shape");
    assert.equal(out.binary, o["binary"], "binary");
    const { binary_data_size: _, ...parameters } = out.parameters;
    assert.deepEqual(parameters, o["parameters"], "parameters");
    if (o["datatype"] === "BYTES") {
      assert.deepEqual(out.elements!.map(toHex), o["elements_hex"], "elements_hex");
      if (o["binary"]) for (const e of out.elements!) assert.equal(e.buffer, body.buffer, "BYTES elements are views over the body");
      continue;
    }
    const t = out.tensor!;
    const shape = o["shape"] as number[];
    assertTensor(t, { dtype: o["dtype"], shape: shape.length === 1 ? [1, shape[0]] : shape, items: o["items"] });
    if (o["binary"] && start % t.data.BYTES_PER_ELEMENT === 0) {
      assert.ok(t.data.buffer === body.buffer && t.data.byteOffset === start, "an aligned blob is a view over the body");
    }
  }
}

describe("golden vectors", () => {
  const files: [string, GoldenCase[], (c: GoldenCase) => void | Promise<void>][] = [
    ["tensors.json", loadGolden("tensors"), checkValid],
    ["interop.json", loadGolden("interop"), checkValid],
    ["invalid.json", loadGolden("invalid"), checkInvalid],
    ["conversions.json", loadGolden("conversions"), checkConversion],
    ["quantization.json", loadGolden("quantization"), checkQuantization],
    ["kserve.json", loadGolden("kserve"), checkKServe],
  ];
  const claimed = new Set(claimedCases(Object.fromEntries(files.map(([name, cases]) => [name, cases]))).map((c) => c.id));
  for (const [, cases, check] of files) for (const c of cases) if (claimed.has(c.id)) it(c.id, () => check(c));
});
