/**
 * Fuzzing of the KServe v2 reader and of the ragged and sparse decoders (SPEC.md 20) with fast-check,
 * seeded from kserve.json, ragged.json and sparse.json (as fuzz.test.ts): a decoder returns a result
 * bounded by its input or throws a DensewireError, never another exception; a ragged or sparse body
 * that decodes is encoded again and must decode to the same parts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type RaggedTensor,
  type SparseTensor,
  type Tensor,
  decodeKServe,
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
} from "../src/index.js";
import { RUNS, assertBounded, decodeOrTyped, mutated, params, target } from "./fuzz-support.js";
import { type GoldenCase, fromHex, loadGolden, toHex } from "./helpers.js";

const utf8 = new TextEncoder();
const bodyOf = (c: GoldenCase) => {
  const hex = c["encoded_hex"] ?? c["input_hex"];
  return typeof hex === "string" ? fromHex(hex) : utf8.encode(String(c["encoded_text"] ?? c["input_text"] ?? ""));
};
type Kinded = RaggedTensor | SparseTensor;
const asTensor = (t: Kinded): Tensor => {
  const bytes = t.data.byteLength + t.offsets.byteLength + (t.kind === "sparse" ? t.indices.byteLength : 0);
  return { dtype: "uint8", shape: [1, bytes], data: new Uint8Array(bytes) } as Tensor;
};
const parts = (t: Kinded) => [t.kind, t.dtype, [...t.shape], Array.from(t.offsets), t.kind === "sparse" ? Array.from(t.indices) : [], toHex(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))];

const codecs = {
  raw: {
    ragged: (b: Uint8Array, c: GoldenCase) => decodeRaggedRaw(b, c["headers"] as Record<string, string>),
    sparse: (b: Uint8Array, c: GoldenCase) => decodeSparseRaw(b, c["headers"] as Record<string, string>),
    again: async (t: Kinded) => {
      if (t.kind === "ragged") {
        const m = encodeRaggedRaw(t);
        return decodeRaggedRaw(m.body, m.headers);
      }
      const m = encodeSparseRaw(t);
      return decodeSparseRaw(m.body, m.headers);
    },
  },
  msgpack: {
    ragged: (b: Uint8Array) => decodeRaggedMsgpack(b),
    sparse: (b: Uint8Array) => decodeSparseMsgpack(b),
    again: async (t: Kinded) => (t.kind === "ragged" ? decodeRaggedMsgpack(encodeRaggedMsgpack(t)) : decodeSparseMsgpack(encodeSparseMsgpack(t))),
  },
  protobuf: {
    ragged: (b: Uint8Array, c: GoldenCase) => decodeRaggedProtobuf(b, { message: c["message"] as never }),
    sparse: (b: Uint8Array, c: GoldenCase) => decodeSparseProtobuf(b, { message: c["message"] as never }),
    again: async (t: Kinded) => (t.kind === "ragged" ? decodeRaggedProtobuf(encodeRaggedProtobuf(t, { message: "RaggedTensor" })) : decodeSparseProtobuf(encodeSparseProtobuf(t, { message: "SparseTensor" }))),
  },
  json: {
    ragged: (b: Uint8Array) => decodeRaggedJSON(b),
    sparse: (b: Uint8Array) => decodeSparseJSON(b),
    again: async (t: Kinded) => (t.kind === "ragged" ? decodeRaggedJSON(encodeRaggedJSON(t)) : decodeSparseJSON(encodeSparseJSON(t))),
  },
  arrow: {
    ragged: (b: Uint8Array) => decodeRaggedArrow(b),
    sparse: (b: Uint8Array) => decodeSparseArrow(b),
    again: async (t: Kinded) => (t.kind === "ragged" ? decodeRaggedArrow(await encodeRaggedArrow(t)) : decodeSparseArrow(await encodeSparseArrow(t))),
  },
};

describe(`fuzzing the KServe, ragged and sparse decoders (${RUNS} inputs each)`, () => {
  it("KServe v2 responses", target("KServe v2 responses"), async () => {
    const cases = loadGolden("kserve").filter((c) => c["format"] === "kserve");
    await fc.assert(
      fc.asyncProperty(mutated(cases.map(bodyOf)), async (input) => {
        const r = await decodeOrTyped(input.bytes, () => decodeKServe(input.bytes, cases[input.seed]!["headers"] as Record<string, string>));
        if (r === undefined) return;
        for (const out of r.outputs.values()) if (out.tensor !== undefined) assertBounded(out.tensor, input.bytes);
      }),
      params(),
    );
  });

  for (const format of ["raw", "msgpack", "protobuf", "json", "arrow"] as const) {
    it(`ragged and sparse, ${format}`, target(`ragged and sparse, ${format}`), async () => {
      const cases = [...loadGolden("ragged"), ...loadGolden("sparse")].filter((c) => c["format"] === format);
      const codec = codecs[format];
      await fc.assert(
        fc.asyncProperty(mutated(cases.map(bodyOf)), async (input) => {
          const c = cases[input.seed]!;
          const t = await decodeOrTyped(input.bytes, () => (c["kind"] === "sparse" ? codec.sparse(input.bytes, c) : codec.ragged(input.bytes, c)));
          if (t === undefined) return;
          assertBounded(asTensor(t), input.bytes);
          let back: Kinded;
          try {
            back = await codec.again(t);
          } catch (e) {
            throw new Error(`the decoded value does not encode and decode again (${String(e)}), input ${toHex(input.bytes)}`, { cause: e });
          }
          assert.deepEqual(parts(back), parts(t), `re-encoded parts differ, input ${toHex(input.bytes)}`);
        }),
        params(),
      );
    });
  }
});
