import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  availableBase64Backends,
  base64Backend,
  base64DecodedLength,
  base64ToBytes,
  bytesToBase64,
  decodeBase64,
  decodeBase64Into,
  encodeBase64,
  makeTensor,
  setBase64Backend,
  type Base64Backend,
} from "../src/index.js";
import { assertDensewireError, tensorItems } from "./helpers.js";

/**
 * A stand-in for the ES2026 Uint8Array Base64 methods (Node 20 has none), with their documented
 * leniency: ASCII whitespace is skipped, other bad characters throw a SyntaxError.
 */
function installNativePolyfill(): () => void {
  const proto = Uint8Array.prototype as unknown as Record<string, unknown>;
  proto["toBase64"] = function (this: Uint8Array) {
    return Buffer.from(this.buffer, this.byteOffset, this.byteLength).toString("base64");
  };
  proto["setFromBase64"] = function (this: Uint8Array, s: string) {
    const stripped = s.replace(/[\t\n\f\r ]/g, "");
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(stripped) || stripped.length % 4 === 1) throw new SyntaxError("bad base64");
    const bytes = Buffer.from(stripped, "base64");
    const written = Math.min(bytes.length, this.length);
    this.set(bytes.subarray(0, written));
    return { read: s.length, written };
  };
  return () => {
    delete proto["toBase64"];
    delete proto["setFromBase64"];
  };
}

let seed = 7;
const rand = (k: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % k);
const randomBytes = (n: number) => Uint8Array.from({ length: n }, () => rand(256));

/** The rules of SPEC.md section 5, written as plainly as possible (the test's reference). */
function referenceError(s: string): number | undefined {
  const bad = s.search(/[^A-Za-z0-9+/=]/);
  if (bad >= 0) return bad;
  const p = s.indexOf("=");
  if (p >= 0) {
    const tail = s.slice(p);
    if (!/^=+$/.test(tail) || tail.length > 2 || s.length % 4 !== 0 || (p % 4 !== 2 && p % 4 !== 3)) return p;
    return undefined;
  }
  return s.length % 4 === 1 ? s.length - 1 : undefined;
}

const uninstall = installNativePolyfill();
after(() => {
  uninstall();
  setBase64Backend("auto");
});

describe("base64 backends", () => {
  it("picks the fastest available backend and refuses unavailable ones", () => {
    assert.deepEqual(availableBase64Backends(), ["native", "node", "js"]);
    setBase64Backend("auto");
    assert.equal(base64Backend(), "native");
    uninstall();
    assert.deepEqual(availableBase64Backends(), ["node", "js"]);
    assert.throws(() => setBase64Backend("native"), /not available/);
    installNativePolyfill();
  });

  for (const backend of ["native", "node", "js"] as Base64Backend[]) {
    describe(`backend ${backend}`, () => {
      const use = () => setBase64Backend(backend);

      it("round-trips every length 0..64 and a large buffer like Buffer does", () => {
        use();
        for (let n = 0; n <= 64; n++) {
          const b = randomBytes(n);
          const s = bytesToBase64(b);
          assert.equal(s, Buffer.from(b).toString("base64"));
          assert.deepEqual(base64ToBytes(s), b);
        }
        const big = randomBytes(100_003);
        const s = bytesToBase64(big);
        assert.equal(s, Buffer.from(big).toString("base64"));
        assert.deepEqual(base64ToBytes(s), big);
      });

      it("accepts unpadded input and ignores non-zero trailing bits", () => {
        use();
        assert.deepEqual(base64ToBytes("AACAPwAAAEA"), Uint8Array.from([0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]));
        assert.deepEqual(base64ToBytes("AACAPwAAAEB="), Uint8Array.from([0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]));
        assert.deepEqual(base64ToBytes("/w"), Uint8Array.from([0xff]));
        assert.deepEqual(base64ToBytes("/x=="), Uint8Array.from([0xff]));
        assert.deepEqual(base64ToBytes(""), new Uint8Array(0));
      });

      it("rejects exactly what SPEC.md section 5 rejects, at the same offset (fuzzed)", () => {
        use();
        const chars = "AQgw+/=  -_*\n\u00e9\u{1F600}";
        for (let k = 0; k < 4000; k++) {
          let s = Buffer.from(randomBytes(rand(12))).toString("base64");
          const edits = rand(3);
          for (let e = 0; e < edits; e++) {
            const at = rand(s.length + 1);
            const op = rand(3);
            const ch = chars[rand(chars.length)]!;
            s = op === 0 ? s.slice(0, at) + ch + s.slice(at) : op === 1 ? s.slice(0, at) + s.slice(at + 1) : s.slice(0, at) + ch + s.slice(at + 1);
          }
          const expected = referenceError(s);
          if (expected === undefined) {
            const out = base64ToBytes(s);
            assert.deepEqual(out, new Uint8Array(Buffer.from(s, "base64")), JSON.stringify(s));
            assert.equal(base64DecodedLength(s), out.length);
          } else {
            assertDensewireError(() => base64ToBytes(s), { category: "invalid_base64", offset: expected });
            assertDensewireError(() => decodeBase64Into(s, new Uint8Array(3)), { category: "invalid_base64", offset: expected });
          }
        }
      });

      it("checks the length after the characters", () => {
        use();
        assertDensewireError(() => decodeBase64Into("AACAPwAA", new Uint8Array(8), "x"), { category: "length_mismatch", offset: 6, field: "x" });
        assertDensewireError(() => decodeBase64Into("AACAPwAAAEAAAEBA", new Uint8Array(8)), { category: "length_mismatch", offset: 8 });
        assertDensewireError(() => decodeBase64Into("AAC*", new Uint8Array(8)), { category: "invalid_base64", offset: 3 });
      });

      it("decodes and encodes tensors of every dtype in both byte orders", () => {
        use();
        const tensors = [
          makeTensor("float32", [2, 2], new Float32Array(new Uint32Array([0x3f800000, 0x7fa00001, 0x80000000, 0x00000001]).buffer)),
          makeTensor("float16", [1, 3], Uint16Array.from([0x3c00, 0x7d01, 0x8001])),
          makeTensor("bfloat16", [1, 2], Uint16Array.from([0x3f80, 0xff81])),
          makeTensor("float64", [1, 2], new Float64Array(new BigUint64Array([0x7ff0000000000001n, 0x3fb999999999999an]).buffer)),
          makeTensor("int8", [1, 3], Int8Array.from([-128, 0, 127])),
          makeTensor("uint8", [1, 2], Uint8Array.from([0, 255])),
          makeTensor("binary", [2, 12], Uint8Array.from([0xb3, 0xf0, 0x00, 0x10])),
        ];
        for (const t of tensors) {
          for (const byteorder of ["little", "big"] as const) {
            const s = encodeBase64(t, { byteorder });
            const back = decodeBase64(s, { dtype: t.dtype, shape: t.shape, byteorder });
            assert.deepEqual(tensorItems(back), tensorItems(t), `${t.dtype} ${byteorder}`);
            assert.equal(back.data.byteOffset % back.data.BYTES_PER_ELEMENT, 0);
          }
        }
        assert.equal(encodeBase64(tensors[0]!, { byteorder: "big" }), "P4AAAH+gAAGAAAAAAAAAAQ==");
      });
    });
  }
});

describe("base64 tensor options", () => {
  it("validates dtype, byteorder and shape before the string", () => {
    assertDensewireError(() => decodeBase64("***", { dtype: "fp16", shape: [1, 1] }), { category: "unknown_dtype", field: "dtype" });
    assertDensewireError(() => decodeBase64("***", { dtype: "float32", shape: [1, 1], byteorder: "network" }), { category: "invalid_field", field: "byteorder" });
    assertDensewireError(() => decodeBase64("", { dtype: "float32", shape: [1, -1] }), { category: "invalid_field", field: "shape" });
    assertDensewireError(() => decodeBase64("", { dtype: "float32", shape: [1] }), { category: "invalid_field", field: "shape" });
  });

  it("reports the character of an error in its message", () => {
    const e = assertDensewireError(() => base64ToBytes("AA\tA"), { category: "invalid_base64", offset: 2 });
    assert.match(e.message, /U\+0009 at offset 2/);
  });
});

describe("without Buffer (as in a browser)", () => {
  it("loads, picks the portable backend, and decodes", async () => {
    const { execFile } = await import("node:child_process");
    const { promisify } = await import("node:util");
    const { fileURLToPath } = await import("node:url");
    const index = new URL("../src/index.js", import.meta.url).href;
    const script = `delete globalThis.Buffer;
      const dw = await import(${JSON.stringify(index)});
      const t = dw.decodeJSON('{"data":[{"index":0,"embedding":"AACAPwAAAEA="}]}');
      console.log(dw.base64Backend(), Array.from(t.data).join(","), dw.encodeBase64(t), typeof globalThis.Buffer);`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: fileURLToPath(new URL(".", import.meta.url)) });
    assert.equal(stdout.trim(), "js 1,2 AACAPwAAAEA= undefined");
  });
});
