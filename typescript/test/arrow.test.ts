import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as A from "apache-arrow";
import { decodeArrow, encodeArrow, makeTensor, setArrowImporter } from "../src/index.js";
import { assertDensewireErrorAsync, tensorItems } from "./helpers.js";

function stream(columns: Record<string, A.Data>, batches = 1, meta: Record<string, string> = {}): Uint8Array {
  const fields = Object.entries(columns).map(([name, d]) => new A.Field(name, d.type, false));
  const schema = new A.Schema(fields, new Map(Object.entries(meta)));
  const length = Object.values(columns)[0]!.length;
  const batch = () => new A.RecordBatch(schema, A.makeData({ type: new A.Struct(fields), length, nullCount: 0, children: Object.values(columns) }) as never);
  return A.RecordBatchStreamWriter.writeAll(Array.from({ length: batches }, batch)).toUint8Array(true);
}

function f32List(values: number[], d: number): A.Data {
  const inner = new A.Float32();
  const child = A.makeData({ type: inner, length: values.length, nullCount: 0, data: Float32Array.from(values) });
  return A.makeData({ type: new A.FixedSizeList(d, new A.Field("item", inner, false)), length: values.length / d, nullCount: 0, child });
}

describe("Arrow IPC", () => {
  after(() => setArrowImporter(undefined));

  it("names the optional peer dependency when it cannot be loaded", async () => {
    setArrowImporter(() => Promise.reject(Object.assign(new Error("Cannot find package 'apache-arrow'"), { code: "ERR_MODULE_NOT_FOUND" })));
    const t = makeTensor("float32", [1, 1], new Float32Array(1));
    await assert.rejects(encodeArrow(t), /optional peer dependency 'apache-arrow'.*npm install apache-arrow/);
    await assert.rejects(decodeArrow(new Uint8Array(8)), /apache-arrow/);
    setArrowImporter(undefined);
    assert.equal((await decodeArrow(await encodeArrow(t))).dtype, "float32");
  });

  it("fails clearly in an install without apache-arrow, and everything else still works", async () => {
    const pkg = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
    const dir = mkdtempSync(join(tmpdir(), "densewire-no-arrow-"));
    try {
      const target = join(dir, "node_modules", "densewire");
      mkdirSync(target, { recursive: true });
      cpSync(join(pkg, "dist"), join(target, "dist"), { recursive: true });
      cpSync(join(pkg, "package.json"), join(target, "package.json"));
      for (const dep of ["@msgpack", "@bufbuild"]) symlinkSync(join(pkg, "node_modules", dep), join(dir, "node_modules", dep));
      writeFileSync(
        join(dir, "main.mjs"),
        `import { decodeArrow, decodeBase64 } from "densewire";
         console.log(decodeBase64("AACAPw==", { dtype: "float32", shape: [1, 1] }).data[0]);
         try { await decodeArrow(new Uint8Array(8)); } catch (e) { console.log(e.message); }`,
      );
      const { stdout } = await promisify(execFile)(process.execPath, [join(dir, "main.mjs")], { cwd: dir });
      const [first, second] = stdout.trim().split("\n");
      assert.equal(first, "1");
      assert.match(second!, /optional peer dependency 'apache-arrow'.*npm install apache-arrow/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("decodes as a view of the body and round-trips every dtype", async () => {
    const tensors = [
      makeTensor("float32", [2, 2], new Float32Array(new Uint32Array([0x7fa00001, 0x80000000, 1, 2]).buffer)),
      makeTensor("float16", [1, 3], Uint16Array.from([0x7c01, 0x3c00, 0x8001])),
      makeTensor("bfloat16", [2, 1], Uint16Array.from([0xff81, 0x3f80])),
      makeTensor("float64", [1, 2], Float64Array.from([0.1, -0])),
      makeTensor("int8", [1, 2], Int8Array.from([-128, 127])),
      makeTensor("uint8", [3, 1], Uint8Array.from([0, 1, 255])),
      makeTensor("binary", [2, 12], Uint8Array.from([0xb3, 0xf0, 0x00, 0x10])),
      makeTensor("float32", [0, 4], new Float32Array(0)),
    ];
    for (const t of tensors) {
      const body = await encodeArrow(t, { model: "m", usage: { prompt_tokens: 1, total_tokens: 2 } });
      const back = await decodeArrow(body);
      assert.equal(back.dtype, t.dtype);
      assert.deepEqual(back.shape, t.shape);
      assert.deepEqual(tensorItems(back), tensorItems(t));
      assert.equal(back.model, "m");
      assert.deepEqual(back.usage, { prompt_tokens: 1, total_tokens: 2 });
      if (t.data.length > 0) assert.equal(back.data.buffer, body.buffer, `${t.dtype}: a view`);
    }
  });

  it("concatenates several record batches and infers the dtype without metadata", async () => {
    const body = stream({ embedding: f32List([1, 2, 3, 4], 2) }, 3);
    const t = await decodeArrow(body);
    assert.equal(t.dtype, "float32");
    assert.deepEqual(t.shape, [6, 2]);
    assert.deepEqual(Array.from(t.data), [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]);
  });

  it("rejects what does not carry a densewire tensor", async () => {
    // a legacy prefix announcing 67,305,985 bytes of metadata in 9 bytes: framing first (SPEC.md section 10)
    await assertDensewireErrorAsync(() => decodeArrow(Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9])), { category: "truncated", offset: 9 });
    await assertDensewireErrorAsync(() => decodeArrow(Uint8Array.from([0xfe, 0xff, 0xff, 0xff, 5, 6, 7, 8, 9])), { category: "malformed" });
    await assertDensewireErrorAsync(() => decodeArrow(stream({ vector: f32List([1, 2], 2) })), { category: "invalid_field", field: "embedding" });
    await assertDensewireErrorAsync(() => decodeArrow(stream({ embedding: f32List([1, 2], 2) }, 1, { "densewire.dtype": "float16" })), {
      category: "invalid_field",
      field: "embedding",
    });
    await assertDensewireErrorAsync(() => decodeArrow(stream({ embedding: f32List([1, 2], 2) }, 1, { "densewire.dtype": "fp32" })), {
      category: "unknown_dtype",
      field: "densewire.dtype",
    });
    await assertDensewireErrorAsync(() => decodeArrow(stream({ embedding: f32List([1, 2], 2) }, 1, { "densewire.dimensions": "3" })), {
      category: "invalid_field",
      field: "densewire.dimensions",
    });
    const utf8 = A.vectorFromArray(["a"], new A.Utf8()).data[0]!;
    await assertDensewireErrorAsync(() => decodeArrow(stream({ embedding: utf8 })), { category: "invalid_field", field: "embedding" });
  });

  it("takes d of binary from densewire.dimensions", async () => {
    const t = makeTensor("binary", [1, 12], Uint8Array.from([0xff, 0xf0]));
    const back = await decodeArrow(await encodeArrow(t));
    assert.deepEqual(back.shape, [1, 12]);
  });
});
