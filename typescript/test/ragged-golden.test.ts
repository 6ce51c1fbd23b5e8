/**
 * The golden vectors of ragged and sparse tensors (SPEC.md 20.8, testdata/golden/ragged.json and
 * sparse.json): every case TypeScript claims decodes to its parts in every format, byte-exact ones
 * encode to their bytes, every other encoding decodes back; invalid cases fail with their category,
 * offset and field.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type RaggedTensor,
  type SparseTensor,
  decodeRaggedArrow,
  decodeRaggedJSON,
  decodeRaggedMsgpack,
  decodeRaggedProtobuf,
  decodeRaggedRaw,
  decodeSparseArrow,
  decodeSparseJSON,
  decodeSparseMsgpack,
  decodeSparseProtobuf,
  decodeSparseRaw,
  encodeRaggedArrow,
  encodeRaggedJSON,
  encodeRaggedMsgpack,
  encodeRaggedProtobuf,
  encodeRaggedRaw,
  encodeSparseArrow,
  encodeSparseJSON,
  encodeSparseMsgpack,
  encodeSparseProtobuf,
  encodeSparseRaw,
  raggedMatrix,
  sparseVector,
} from "../src/index.js";
import { type GoldenCase, assertDensewireError, assertDensewireErrorAsync, fromHex, itemsToBytes, loadGolden, tensorItems, toHex } from "./helpers.js";
import { claimedCases } from "./capabilities.js";

type Kinded = RaggedTensor | SparseTensor;
type Meta = { model?: string; usage?: { prompt_tokens: number; total_tokens: number } };

const decoders = {
  ragged: { raw: decodeRaggedRaw, msgpack: decodeRaggedMsgpack, protobuf: decodeRaggedProtobuf, json: decodeRaggedJSON, arrow: decodeRaggedArrow },
  sparse: { raw: decodeSparseRaw, msgpack: decodeSparseMsgpack, protobuf: decodeSparseProtobuf, json: decodeSparseJSON, arrow: decodeSparseArrow },
};

async function decode(c: GoldenCase, input: Uint8Array | string): Promise<Kinded> {
  const kind = c["kind"] as "ragged" | "sparse";
  switch (c["format"]) {
    case "raw":
      return decoders[kind].raw(input as Uint8Array, c["headers"] as Record<string, string>);
    case "msgpack":
      return decoders[kind].msgpack(input as Uint8Array);
    case "protobuf":
      return decoders[kind].protobuf(input as Uint8Array, { message: c["message"] as never });
    case "json":
      return decoders[kind].json(input);
    case "arrow":
      return await decoders[kind].arrow(input as Uint8Array);
    default:
      throw new Error(`format ${String(c["format"])}`);
  }
}

/** The case's parts as a tensor to encode (fresh aligned buffers). */
function expected(c: GoldenCase): Kinded {
  const bytes = itemsToBytes(c["items"] as string[]);
  const dtype = c["dtype"] as string;
  const Ctor = { float32: Float32Array, float64: Float64Array, float16: Uint16Array, bfloat16: Uint16Array, int8: Int8Array, uint8: Uint8Array, binary: Uint8Array }[dtype]!;
  const data = new Ctor(bytes.buffer as ArrayBuffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT);
  const base = { dtype, shape: c["shape"], offsets: Uint32Array.from(c["offsets"] as number[]), data };
  return (c["kind"] === "sparse" ? { kind: "sparse", ...base, indices: Uint32Array.from(c["indices"] as number[]) } : { kind: "ragged", ...base }) as Kinded;
}

function assertParts(t: Kinded, c: GoldenCase, what: string): void {
  assert.equal(t.kind, c["kind"], `${what}: kind`);
  assert.equal(t.dtype, c["dtype"], `${what}: dtype`);
  assert.deepEqual(t.shape, c["shape"], `${what}: shape`);
  assert.deepEqual(Array.from(t.offsets), c["offsets"], `${what}: offsets`);
  assert.deepEqual(tensorItems({ dtype: t.dtype, shape: [0, 0], data: t.data } as never), c["items"], `${what}: items (bits)`);
  if (t.kind === "sparse") {
    assert.deepEqual(Array.from(t.indices), c["indices"], `${what}: indices`);
    for (let i = 0; i < t.shape[0]; i++) assert.equal(sparseVector(t, i).values.buffer, t.data.buffer, "vectors are views");
  } else {
    for (let i = 0; i < t.shape[0]; i++) {
      const m = raggedMatrix(t, i);
      assert.equal(m.data.buffer, t.data.buffer, "matrices are views over the one buffer");
      assert.equal(m.shape[0], t.offsets[i + 1]! - t.offsets[i]!);
    }
  }
}

async function encode(t: Kinded, c: GoldenCase, meta: Meta): Promise<Uint8Array | string | { body: Uint8Array; headers: Record<string, string> }> {
  const r = t.kind === "ragged";
  switch (c["format"]) {
    case "raw":
      return r ? encodeRaggedRaw(t, meta) : encodeSparseRaw(t, meta);
    case "msgpack":
      return r ? encodeRaggedMsgpack(t, meta) : encodeSparseMsgpack(t, meta);
    case "protobuf": {
      const o = { ...meta, message: c["message"] as never };
      return r ? encodeRaggedProtobuf(t, o) : encodeSparseProtobuf(t, o);
    }
    case "json": {
      const o = { ...meta, encodingFormat: c["encoding_format"] as "float" | "base64", byteorder: c["byteorder"] as "little" | "big" };
      return r ? encodeRaggedJSON(t, o) : encodeSparseJSON(t, o);
    }
    default:
      return r ? await encodeRaggedArrow(t, meta) : await encodeSparseArrow(t, meta);
  }
}

async function checkValid(c: GoldenCase): Promise<void> {
  const input = c["format"] === "json" ? (c["encoded_text"] as string) : fromHex(c["encoded_hex"] as string);
  const decoded = await decode(c, input);
  assertParts(decoded, c, "decoded");
  const meta: Meta = {};
  if ("model" in c) meta.model = c["model"] as string;
  if ("usage" in c) meta.usage = c["usage"] as Meta["usage"];
  if ("model" in c) assert.equal(decoded.model, c["model"], "model");
  if ("usage" in c) assert.deepEqual(decoded.usage, c["usage"], "usage");
  const ours = await encode(expected(c), c, meta);
  if (typeof ours === "object" && "body" in ours) {
    if (c["byte_exact"]) {
      assert.equal(toHex(ours.body), c["encoded_hex"], "encoded_hex");
      assert.deepEqual(ours.headers, c["headers"], "headers");
    }
    assertParts(await decode({ ...c, headers: ours.headers }, ours.body), c, "ours");
    return;
  }
  if (c["byte_exact"]) assert.equal(typeof ours === "string" ? ours : toHex(ours), c["format"] === "json" ? c["encoded_text"] : c["encoded_hex"], "encoded");
  const back = await decode(c, ours);
  assertParts(back, c, "ours");
  if ("model" in c) assert.equal(back.model, c["model"], "our model");
  if ("usage" in c) assert.deepEqual(back.usage, c["usage"], "our usage");
}

async function checkInvalid(c: GoldenCase): Promise<void> {
  const expectedError = { category: c["error"] as string, offset: c["offset"] as number | undefined, field: c["field"] as string | undefined };
  const input = "input_hex" in c ? fromHex(c["input_hex"] as string) : (c["input_text"] as string);
  if (c["format"] === "arrow") {
    await assertDensewireErrorAsync(() => decode(c, input), expectedError);
    return;
  }
  let caught: unknown;
  try {
    await decode(c, input);
  } catch (e) {
    caught = e;
  }
  assertDensewireError(() => {
    if (caught !== undefined) throw caught;
  }, expectedError);
}

describe("golden vectors: ragged and sparse tensors", () => {
  const files = { "ragged.json": loadGolden("ragged"), "sparse.json": loadGolden("sparse") };
  for (const c of claimedCases(files)) it(c.id, () => (c.id.startsWith("invalid.") ? checkInvalid(c) : checkValid(c)));
});
