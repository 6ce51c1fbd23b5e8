// Cross-check (manual, needs pyarrow; not part of ci.sh): SPEC.md section 10 asks that our own Arrow
// encoding decode by pyarrow too. This writes our encoding of every golden arrow case to a folder,
// then arrow-pyarrow-check.py reads each back with pyarrow and compares the bits with the golden items.
//
//   npm run build && node scripts/arrow-pyarrow-check.mjs /tmp/arrow-x && python3 scripts/arrow-pyarrow-check.py /tmp/arrow-x
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
const dw = await import(new URL("../dist/index.js", import.meta.url).href);
const cases = JSON.parse(readFileSync(new URL("../../testdata/golden/tensors.json", import.meta.url), "utf8")).cases.filter((c) => c.format === "arrow");
const dir = process.argv[2] ?? "arrow-check";
mkdirSync(dir, { recursive: true });
const sizes = { float32: 4, float16: 2, bfloat16: 2, float64: 8, int8: 1, uint8: 1, binary: 1 };
const Ctors = { float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, binary: Uint8Array };
for (const c of cases) {
  const bytes = Buffer.from(c.items.map((h) => h.match(/../g).reverse().join("")).join(""), "hex");
  const buf = new Uint8Array(bytes).buffer;
  const t = dw.makeTensor(c.dtype, c.shape, new Ctors[c.dtype](buf, 0, bytes.length / sizes[c.dtype]));
  const meta = {}; if (c.model) meta.model = c.model; if (c.usage) meta.usage = c.usage;
  writeFileSync(`${dir}/${c.id}.arrows`, await dw.encodeArrow(t, meta));
}
writeFileSync(`${dir}/cases.json`, JSON.stringify(cases));
console.log(cases.length, "written");
