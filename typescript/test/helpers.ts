/** Shared test helpers: golden files, hex, bit-exact comparisons. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { DensewireError, type DType, type Tensor, DTYPES, type ErrorCategory } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));

/** The repository root: the first ancestor of this file holding testdata/golden. */
export function repoRoot(): string {
  let dir = here;
  for (;;) {
    if (existsSync(join(dir, "testdata", "golden", "tensors.json"))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`testdata/golden not found above ${here}`);
    dir = up;
  }
}

export interface GoldenCase {
  id: string;
  dtype: unknown;
  shape: unknown;
  items: unknown;
  [key: string]: unknown;
}

export function loadGolden(name: "tensors" | "conversions" | "invalid" | "interop" | "quantization" | "retry" | "kserve" | "ragged" | "sparse"): GoldenCase[] {
  const doc = JSON.parse(readFileSync(join(repoRoot(), "testdata", "golden", `${name}.json`), "utf8")) as { cases: GoldenCase[] };
  return doc.cases;
}

export function fromHex(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, "hex"));
}

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

/** Items (hex in natural big-endian notation) laid out little-endian, as a tensor's bytes. */
export function itemsToBytes(items: readonly string[]): Uint8Array {
  return fromHex(items.map((h) => h.match(/../g)!.reverse().join("")).join(""));
}

/** A tensor's items as hex in natural (big-endian) notation, read from its memory (bits, not values). */
export function tensorItems(t: Tensor): string[] {
  const size = DTYPES[t.dtype].itemBytes;
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const out: string[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(toHex(bytes.subarray(i, i + size).slice().reverse()));
  return out;
}

/** A tensor of a golden case, built from its items (a fresh aligned buffer). */
export function tensorOf(c: { dtype: unknown; shape: unknown; items: unknown }): Tensor {
  const dtype = c.dtype as DType;
  const bytes = itemsToBytes(c.items as string[]);
  const size = DTYPES[dtype].itemBytes;
  const Ctor = { float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, binary: Uint8Array }[dtype];
  return { dtype, shape: c.shape as [number, number], data: new Ctor(bytes.buffer as ArrayBuffer, 0, bytes.length / size) } as Tensor;
}

/** Asserts that a decoded tensor has the case's dtype, shape and item bits. */
export function assertTensor(actual: Tensor, c: { dtype: unknown; shape: unknown; items: unknown }): void {
  assert.equal(actual.dtype, c.dtype, "dtype");
  assert.deepEqual(actual.shape, c.shape, "shape");
  assert.deepEqual(tensorItems(actual), c.items, "items (bits)");
}

/** Asserts that fn throws a DensewireError of the category, and offset/field when given. */
export function assertDensewireError(
  fn: () => unknown,
  expected: { category: ErrorCategory | string; offset?: number | undefined; field?: string | undefined },
): DensewireError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  return checkError(caught, expected);
}

export async function assertDensewireErrorAsync(
  fn: () => Promise<unknown>,
  expected: { category: ErrorCategory | string; offset?: number | undefined; field?: string | undefined },
): Promise<DensewireError> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  return checkError(caught, expected);
}

function checkError(caught: unknown, expected: { category: string; offset?: number | undefined; field?: string | undefined }): DensewireError {
  assert.ok(caught !== undefined, `expected a ${expected.category} error, but nothing was thrown`);
  if (!(caught instanceof DensewireError)) throw caught;
  assert.equal(caught.category, expected.category, `category (message: ${caught.message})`);
  if (expected.offset !== undefined) assert.equal(caught.offset, expected.offset, `offset (message: ${caught.message})`);
  if (expected.field !== undefined) assert.equal(caught.field, expected.field, `field (message: ${caught.message})`);
  return caught;
}
