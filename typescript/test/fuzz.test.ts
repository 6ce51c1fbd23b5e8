/**
 * Fuzzing of every decoder with fast-check, seeded from the golden corpus (testdata/golden): each
 * target mutates the golden bodies of its format (see fuzz-support.ts) and checks that the decoder
 * returns a result bounded by its input or throws a DensewireError, never another exception; a body
 * that decodes is encoded again and must decode to the same bits (decode(encode(x)) = x). FUZZ_RUNS
 * inputs per target (2000 in CI; the long run of bench/fuzz/RESULTS.md sets more).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type DType,
  DensewireError,
  type ProtobufMessage,
  type Table,
  type TableFormat,
  type Embeddings,
  type Tensor,
  columnsHeader,
  decodeArrow,
  decodeBase64,
  decodeJSON,
  decodeMsgpack,
  decodeProtobuf,
  decodeRaw,
  decodeTableArrow,
  decodeTableSync,
  encodeArrow,
  encodeBase64,
  encodeJSON,
  encodeMsgpack,
  encodeProtobuf,
  encodeRaw,
  encodeTableArrow,
  encodeTableSync,
  parseColumnsHeader,
  tableHeaders,
} from "../src/index.js";
import { type FuzzInput, RUNS, assertBounded, byteString, decodeOrTyped, mutated, params, target } from "./fuzz-support.js";
import { type GoldenCase, assertDensewireErrorAsync, fromHex, loadGolden, toHex } from "./helpers.js";
import { loadTablesGolden } from "./tables-helpers.js";


const utf8 = new TextEncoder();
const bodyOf = (c: GoldenCase) => {
  const hex = c["encoded_hex"] ?? c["input_hex"];
  return typeof hex === "string" ? fromHex(hex) : utf8.encode(String(c["encoded_text"] ?? c["input_text"] ?? ""));
};

function sameTensor(a: Tensor, b: Tensor, input: Uint8Array): void {
  const bytes = (t: Tensor) => toHex(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  const id = (t: Tensor) => (t as Embeddings).quantization;
  assert.deepEqual([b.dtype, [...b.shape], bytes(b), id(b)], [a.dtype, [...a.shape], bytes(a), id(a)], `re-encoded tensor differs, input ${toHex(input)}`);
}

function sameTable(a: Table, b: Table, input: Uint8Array): void {
  const norm = (t: Table) => ({
    rows: t.rows,
    columns: t.columns.map((c) => ({
      name: c.name,
      type: c.type,
      values: Array.isArray(c.values) ? c.values : toHex(new Uint8Array(c.values.buffer, c.values.byteOffset, c.values.byteLength)),
    })),
  });
  assert.deepEqual(norm(b), norm(a), `re-encoded table differs, input ${toHex(input)}`);
}

interface Target<T> {
  corpus: Uint8Array[];
  decode(input: FuzzInput): T | Promise<T>;
  /** decode(encode(result)), when the format has an encoder. */
  again?(result: T, input: FuzzInput): T | Promise<T>;
}

async function fuzz<T extends Tensor | Table>(target: Target<T>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(mutated(target.corpus), async (input) => {
      const result = await decodeOrTyped(input.bytes, () => target.decode(input));
      if (result === undefined) return;
      assertBounded(result, input.bytes);
      if (target.again === undefined) return;
      let again: T;
      try {
        again = await target.again(result, input);
      } catch (e) {
        throw new Error(`the decoded value does not encode and decode again (${String(e)}), input ${toHex(input.bytes)}`, { cause: e });
      }
      if ("columns" in result) sameTable(result, again as Table, input.bytes);
      else sameTensor(result, again as Tensor, input.bytes);
    }),
    params(),
  );
}

// the tensor envelope cases, and the int8/uint8 responses with their quantization id (SPEC.md 17.5)
const tensors = [...loadGolden("tensors"), ...loadGolden("quantization").filter((c) => c["operation"] === "envelope")];
const ofFormat = (format: string) => tensors.filter((c) => c["format"] === format);

describe(`fuzzing the tensor decoders (${RUNS} inputs each)`, () => {
  it("JSON envelope", target("JSON envelope"), async () => {
    const cases = ofFormat("json");
    await fuzz<Tensor>({
      corpus: cases.map(bodyOf),
      decode: ({ bytes }) => decodeJSON(bytes),
      again: (t) => decodeJSON(encodeJSON(t, { encodingFormat: "base64" })),
    });
  });

  it("Base64", target("Base64"), async () => {
    const cases = ofFormat("base64");
    const opts = (seed: number) => {
      const c = cases[seed]!;
      return { dtype: c.dtype as DType, shape: c.shape as number[], byteorder: c["byteorder"] as "little" | "big" };
    };
    await fuzz<Tensor>({
      corpus: cases.map(bodyOf),
      decode: ({ bytes, seed }) => decodeBase64(byteString(bytes), opts(seed)),
      again: (t, { seed }) => decodeBase64(encodeBase64(t, { byteorder: opts(seed).byteorder }), opts(seed)),
    });
  });

  it("raw body", target("raw body"), async () => {
    const cases = ofFormat("raw");
    await fuzz<Tensor>({
      corpus: cases.map(bodyOf),
      decode: ({ bytes, seed }) => decodeRaw(bytes, cases[seed]!["headers"] as Record<string, string>),
      again: (t) => {
        const m = encodeRaw(t);
        return decodeRaw(m.body, m.headers);
      },
    });
  });

  it("raw headers (Densewire-Dtype, -Shape, -Byteorder, -Version)", target("raw headers (Densewire-Dtype, -Shape, -Byteorder, -Version)"), async () => {
    // the corpus is the header values; the body is the case's own
    const cases = ofFormat("raw");
    const slots = cases.flatMap((c, i) => Object.keys(c["headers"] as object).map((name) => ({ i, name })));
    await fuzz<Tensor>({
      corpus: slots.map(({ i, name }) => utf8.encode((cases[i]!["headers"] as Record<string, string>)[name]!)),
      decode: ({ bytes, seed }) => {
        const { i, name } = slots[seed]!;
        return decodeRaw(bodyOf(cases[i]!), { ...(cases[i]!["headers"] as Record<string, string>), [name]: byteString(bytes) });
      },
    });
  });

  it("MessagePack", target("MessagePack"), async () => {
    await fuzz<Tensor>({
      corpus: ofFormat("msgpack").map(bodyOf),
      decode: ({ bytes }) => decodeMsgpack(bytes),
      again: (t) => decodeMsgpack(encodeMsgpack(t)),
    });
  });

  it("Protobuf", target("Protobuf"), async () => {
    const cases = ofFormat("protobuf");
    const message = (seed: number) => cases[seed]!["message"] as ProtobufMessage;
    await fuzz<Tensor>({
      corpus: cases.map(bodyOf),
      decode: ({ bytes, seed }) => decodeProtobuf(bytes, { message: message(seed) }),
      again: (t, { seed }) => decodeProtobuf(encodeProtobuf(t, { message: message(seed) }), { message: message(seed) }),
    });
  });

  it("Arrow", target("Arrow"), async () => {
    await fuzz<Tensor>({
      corpus: ofFormat("arrow").map(bodyOf),
      decode: ({ bytes }) => decodeArrow(bytes),
      again: async (t) => decodeArrow(await encodeArrow(t)),
    });
  });
});

const tables = loadTablesGolden();

describe(`fuzzing the table decoders (${RUNS} inputs each)`, () => {
  for (const format of ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf"] as const) {
    it(format, target(format), async () => {
      const cases = tables.filter((c) => c["format"] === format);
      await fuzz<Table>({
        corpus: cases.map(bodyOf),
        decode: ({ bytes, seed }) => decodeTableSync(bytes, format, { headers: (cases[seed]!["headers"] ?? {}) as Record<string, string> }),
        again: (t) => decodeTableSync(encodeTableSync(t, format), format, { headers: tableHeaders(t) }),
      });
    });
  }

  it("arrow", target("arrow"), async () => {
    await fuzz<Table>({
      corpus: tables.filter((c) => c["format"] === "arrow").map(bodyOf),
      decode: ({ bytes }) => decodeTableArrow(bytes),
      again: async (t) => decodeTableArrow(await encodeTableArrow(t)),
    });
  });

  it("Densewire-Columns, -Rows and -Table of the CSV and JSON objects layouts", target("Densewire-Columns, -Rows and -Table of the CSV and JSON objects layouts"), async () => {
    const cases = tables.filter((c) => (c["format"] === "csv" || c["format"] === "json") && c["headers"] !== undefined);
    const slots = cases.flatMap((_c, i) => ["Densewire-Columns", "Densewire-Rows", "Densewire-Table"].map((name) => ({ i, name })));
    await fuzz<Table>({
      corpus: slots.map(({ i, name }) => utf8.encode((cases[i]!["headers"] as Record<string, string>)[name]!)),
      decode: ({ bytes, seed }) => {
        const { i, name } = slots[seed]!;
        const c = cases[i]!;
        return decodeTableSync(bodyOf(c), c["format"] as Exclude<TableFormat, "arrow">, { headers: { ...(c["headers"] as Record<string, string>), [name]: byteString(bytes) } });
      },
    });
  });

  it("parseColumnsHeader, and columnsHeader of what it parsed", target("parseColumnsHeader, and columnsHeader of what it parsed"), async () => {
    const values = [...new Set(tables.map((c) => (c["headers"] as Record<string, string> | undefined)?.["Densewire-Columns"]).filter((v): v is string => v !== undefined))];
    await fc.assert(
      fc.asyncProperty(mutated(values.map((v) => utf8.encode(v))), async ({ bytes }) => {
        const specs = await decodeOrTyped(bytes, () => parseColumnsHeader(byteString(bytes)));
        if (specs === undefined) return;
        assert.ok(specs.length <= bytes.length, `${specs.length} columns from ${bytes.length} bytes`);
        assert.deepEqual(parseColumnsHeader(columnsHeader(specs)), specs, `columnsHeader does not round-trip ${toHex(bytes)}`);
      }),
      params(),
    );
  });
});

// What the fuzzing found, kept as regressions (bench/fuzz/RESULTS.md lists them).
describe("fuzz findings", () => {
  const pointsF32 = () => bodyOf(tables.find((c) => c.id === "table.arrow.points_f32")!);

  it("an Arrow schema claiming millions of fields is malformed, not a heap exhaustion", async () => {
    // arrow.f32.negative_zero, mutated: its schema's fields vector claims 7,237,481 entries in 630 bytes;
    // apache-arrow built them until the JavaScript heap ran out and the process died
    const body = fromHex(
    "ffffffffa80100001000000000000a007e000600050008000a000000000104001000000000000a000c000000040008000a000000a000000004000000" +
    "0300000068000000380000000400000024ffffff100000000400000001000000320000001400000064656e7365776972652e64696d656e73696f6e73" +
    "0000000054ffffff140000000400000007000000666c6f61743332000f00000064656e7365776972652e64747970650080ffffff1000000004000000" +
    "01000000310000001100000064656e73dee16563d82265776972652e76657273696f6e00000001000000180000000000120018000800000007000c00" +
    "00001000140012000000000000101800000068000000080000001c000000010000007000000009000000656d62656464696e67000000010000000c00" +
    "000008000c000400080008000000140000000400000007000000666c6f61743332000f00000064656e7365776972652e647479706500000006000800" +
    "04000600000002000000100014000800000007000c00000010001000000000000003100000001c0000000400000000000000040800006974656d0000" +
    "060008000600060000000000010000000000ffffffffa800000014000000000000000c0016000600050008000c000c00000000030400180000000800" +
    "00000000000000000a0018000c00040008000a0000004c00000010000000010000000000000000000000030000000000000000000000000000000000" +
    "000000000000000000000000000000000000000000000000000008000000000000000000000002000000010000000000000000000000000000000200" +
    "00000000000000000000000000000000008000000000ffffffff00000000",
    );
    await assertDensewireErrorAsync(() => decodeArrow(body), { category: "malformed", offset: 0 });
    await assertDensewireErrorAsync(() => decodeTableArrow(body), { category: "malformed", offset: 0 });
  });

  it("an Arrow message announcing a body of petabytes is truncated, not a heap exhaustion", async () => {
    // arrow.*, mutated: the schema message announces a 3,377,742,670,200,832-byte body; apache-arrow ran out of heap
    const body = fromHex(
    "ffffffffa80100001000000000005c000e000600050008000a000000000104001000000000000a000c000000040008000a000000a000000004000000" +
    "0300000068000000380000000400000024ffffff100000000400000001000000330000001400000064656e7365776972652e64696d656e73696f6e73" +
    "0000000054ffffff140000000400000007000000666c6f61743332000f00000064656e7365776972652e64747970650080ffffff1000000004000000" +
    "01000000310000001100000064656e7365776972652e76657273696f6e00000001000000180000000000120018000800000007000c00000010001400" +
    "12000000000000101800000068000000080000001c000000010000007000000009000000656d62656464696e67000000010000000c00000008000c00" +
    "0400080008000000140000000400000007000000666c6f61743332000f00000064656e7365776972652e647439706500000006000800040006000000" +
    "03000000100014000800000007000c00000010001000000000000003100000001c0000000400000000000000040000006974656d0000060008000600" +
    "060000000000010000000000ffffffffa800000014000000000000000c0016000600050008000c000c00000000030400180000001800000000000000" +
    "00000a0018000c00040008000a0000004c00000010000000020000000000000000000000030000000000000000000000000000000000004e614e0000" +
    "000000000000000000000000000000000000000000000018000000000000000000000002000000020000000000000000000000000000000600000000" +
    "00000000000000000000000000803f000020c0cdcccc3d000040400000003f000080bfffffffff00000000",
    );
    await assertDensewireErrorAsync(() => decodeArrow(body), { category: "truncated", offset: body.length });
    await assertDensewireErrorAsync(() => decodeTableArrow(body), { category: "truncated", offset: body.length });
  });

  it("Arrow names and metadata that are not UTF-8 are malformed (apache-arrow put U+FFFD in)", async () => {
    const metadata = fromHex( // arrow.*, mutated: the schema's densewire.dtype value starts with 0x80
    "ffffffffa80100001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a000000a000000004000000" +
    "0300000068000000380000000400000024ffffff100000000400000001000000330000001400000064656e7365776972652e64696d656e73696f6e73" +
    "0000000054ffffff140000000400000007000000806c6f61743332000f00000064656e7365776972652e64747970650080ffffff1000000004000000" +
    "01000000310000001100000064656e7365776972652e76657273696f6e00000001000000180000000000120018000800000007000c00000010001400" +
    "12000000000000101800000068000000080000001c000000010000007000000009000000656d62656464696e67000000010000000c00000008000c00" +
    "0400080008000000140000000400000007000000666c6f61743332000f00000064656e7365776972652e647479706500000006000800040006000000" +
    "03000000100014000800000007000c00000010001000000000000003100000001c0000000400000000000000040000006974656d0000060008000600" +
    "060000000000010000000000ffffffffa800000014000000000000000c0016000600050008000c000c00000000030400180000001800000000000000" +
    "00000a0018000c00040008000a0000004c00000010000000020000000000000000000000030000000000000000000000000000000000000000000000" +
    "000000000000000000000000000000000000000018000000000000000000000002000000020000000000000000000000000000000600000000000000" +
    "00000000000000000000803f000020c0cdcccc3d000040400000003f000080bfffffffff00000000",
    );
    const name = fromHex( // table.arrow.*, mutated: column 2's name starts with 0x80
    "fffffffff00200001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000006c00000004000000" +
    "02000000340000000400000094fdffff140000000400000006000000706f696e747300000f00000064656e7365776972652e7461626c6500c0fdffff" +
    "100000000400000001000000310000001100000064656e7365776972652e76657273696f6e000000040000006c010000e40000007000000004000000" +
    "b6feffff000000031400000054000000080000001800000000000000080000006c6174697475646500000000010000000400000034feffff14000000" +
    "0400000007000000666c6f61743634000e00000064656e7365776972652e74797065000096ffffff000002001effffff00000003140000005c000000" +
    "08000000180000000000000009000000806f6e67697475646500000001000000040000009cfeffff140000000400000007000000666c6f6174363400" +
    "0e00000064656e7365776972652e747970650000000006000800060006000000000002008effffff0000000214000000580000000800000014000000" +
    "00000000060000007374617475730000010000000400000008ffffff140000000400000005000000696e7433320000000e00000064656e7365776972" +
    "652e74797065000008000e00080007000800000000000001200000000000120018000800000007000c00000010001400120000000000000f14000000" +
    "d40000000800000014000000000000000400000075756964000000000300000080000000400000000400000094ffffff18000000040000000a000000" +
    "6172726f772e757569640000140000004152524f573a657874656e73696f6e3a6e616d6500000000ccffffff10000000040000000000000000000000" +
    "180000004152524f573a657874656e73696f6e3a6d657461646174610000000008000c00040008000800000014000000040000000400000075756964" +
    "000000000e00000064656e7365776972652e74797065000000000600080004000600000010000000ffffffff1801000014000000000000000c001600" +
    "0600050008000c000c0000000003040018000000700000000000000000000a0018000c00040008000a0000009c000000100000000300000000000000" +
    "000000000800000000000000000000000000000000000000000000000000000030000000000000003000000000000000000000000000000030000000" +
    "000000000c00000000000000400000000000000000000000000000004000000000000000180000000000000058000000000000000000000000000000" +
    "580000000000000018000000000000000000000004000000030000000000000000000000000000000300000000000000000000000000000003000000" +
    "000000000000000000000000030000000000000000000000000000007c9e6679742540de944be07fc1f90ae70f8fad5bd9cb469fa16570867728950e" +
    "e4eaaaf2d14211e1b3e4080027620cdd010000000000000001000000000000001c3b8f2d9a7e52c0105839b4c8f60c40b6f3fdd455776140b6d4f1a9" +
    "b45f4440022b8716d95e1a40894160e5d0d64140ffffffff00000000",
    );
    for (const body of [metadata, name]) {
      await assertDensewireErrorAsync(() => decodeArrow(body), { category: "malformed", offset: 0 });
      await assertDensewireErrorAsync(() => decodeTableArrow(body), { category: "malformed", offset: 0 });
    }
  });

  it("an Arrow column with an empty name is invalid_field, as SPEC.md section 15.1 says", async () => {
    const body = bodyOf(tables.find((c) => c.id === "table.arrow.all_types")!);
    body[500] = 0x10; // column 6's name becomes "" (apache-arrow wrote it back as "null")
    await assertDensewireErrorAsync(() => decodeTableArrow(body), { category: "invalid_field", field: "columns[6].name" });
  });

  it("an Arrow buffer reaching past the body is malformed, not a RangeError", async () => {
    const body = pointsF32();
    body[873] = 0x01; // the uuid buffer's offset moves past the body's end
    await assert.rejects(decodeTableArrow(body), (e: unknown) => e instanceof DensewireError && e.category === "malformed" && e.field === "uuid");
  });

  it("a table decoded from overlapping Arrow buffers encodes to a stream that reads back the same", async () => {
    const body = pointsF32();
    body[872] = 0x08; // the uuid buffer now overlaps the status buffer
    const t = await decodeTableArrow(body);
    sameTable(t, await decodeTableArrow(await encodeTableArrow(t)), body);
  });
});
