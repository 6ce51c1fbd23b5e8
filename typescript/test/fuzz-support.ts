/**
 * The fuzzing of test/fuzz.test.ts: fast-check arbitraries that mutate the golden bodies (truncation,
 * bit flips, interesting bytes, byte and token insertions, duplicated runs, splices of two bodies of a
 * format), and the check every target makes: the decoder returns a result no larger than the input can
 * describe, or throws a DensewireError; nothing else.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { DensewireError, type Table, type Tensor } from "../src/index.js";
import { toHex } from "./helpers.js";

/** Inputs per target: FUZZ_RUNS (default 2000, CI's short run); `FUZZ_SEED` replays a run. */
export const RUNS = Number(process.env["FUZZ_RUNS"] ?? 2000);
export const SEED = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : 20261125;
const ONLY = process.env["FUZZ_TARGETS"] !== undefined ? new RegExp(process.env["FUZZ_TARGETS"]) : undefined;

/** The options of a target's test: a timeout (a hang fails the target), skipped unless FUZZ_TARGETS (a regex) matches it. */
export function target(name: string): { timeout: number; skip: string | false } {
  return { timeout: Math.max(120_000, RUNS * 60), skip: ONLY !== undefined && !ONLY.test(name) ? `FUZZ_TARGETS=${ONLY.source} leaves it out` : false };
}

const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0xc0, 0xc1, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xcf, 0xd3];
const TOKENS = ["\"", ",", "[", "]", "{", "}", ":", "-", "0", "1e308", "-0", "1e-400", "null", "true", "NaN", "\\u0000", "\r\n", "\n", "\uFEFF", "\\", "9999999999999999999999", "[[[[", "=", "%"].map((t) => new TextEncoder().encode(t));

type Mutation =
  | { kind: "truncate"; at: number }
  | { kind: "flip"; at: number; bit: number }
  | { kind: "set"; at: number; value: number }
  | { kind: "insert"; at: number; bytes: Uint8Array }
  | { kind: "token"; at: number; token: number }
  | { kind: "duplicate"; at: number; length: number; to: number }
  | { kind: "splice"; other: number; at: number; from: number };

const position = fc.nat({ max: 1 << 20 });
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("truncate" as const), at: position }),
  fc.record({ kind: fc.constant("flip" as const), at: position, bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("set" as const), at: position, value: fc.oneof(fc.constantFrom(...INTERESTING), fc.integer({ min: 0, max: 255 })) }),
  fc.record({ kind: fc.constant("insert" as const), at: position, bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant("token" as const), at: position, token: fc.nat({ max: TOKENS.length - 1 }) }),
  fc.record({ kind: fc.constant("duplicate" as const), at: position, length: fc.integer({ min: 1, max: 64 }), to: position }),
  fc.record({ kind: fc.constant("splice" as const), other: fc.nat(), at: position, from: position }),
);

function apply(body: Uint8Array, m: Mutation, corpus: readonly Uint8Array[]): Uint8Array {
  const n = body.length;
  const at = n === 0 ? 0 : m.at % (n + 1);
  const join = (...parts: Uint8Array[]) => {
    const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  };
  switch (m.kind) {
    case "truncate":
      return body.slice(0, at);
    case "flip":
    case "set": {
      if (n === 0) return body;
      const out = body.slice();
      const i = m.at % n;
      out[i] = m.kind === "flip" ? out[i]! ^ (1 << m.bit) : m.value;
      return out;
    }
    case "insert":
      return join(body.subarray(0, at), m.bytes, body.subarray(at));
    case "token":
      return join(body.subarray(0, at), TOKENS[m.token]!, body.subarray(at));
    case "duplicate": {
      const run = body.subarray(at, at + m.length);
      const to = m.to % (n + 1);
      return join(body.subarray(0, to), run, body.subarray(to));
    }
    case "splice": {
      const other = corpus[m.other % corpus.length]!;
      return join(body.subarray(0, at), other.subarray(m.from % (other.length + 1)));
    }
  }
}

/** One fuzz input: a seed of the corpus (its index, for what goes with it) and the mutated bytes. */
export interface FuzzInput {
  seed: number;
  bytes: Uint8Array;
}

/** Golden bodies, each mutated 1 to 4 times (the seeds themselves come too, unmutated). */
export function mutated(corpus: readonly Uint8Array[]): fc.Arbitrary<FuzzInput> {
  return fc.tuple(fc.nat({ max: corpus.length - 1 }), fc.array(mutation, { minLength: 0, maxLength: 4 })).map(([seed, ms]) => {
    let bytes = corpus[seed]!;
    for (const m of ms) bytes = apply(bytes, m, corpus);
    return { seed, bytes };
  });
}

/** Bytes as a string of the same code units (a mutated header value, a Base64 text). */
export function byteString(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}

/** Bytes the decoded value holds: typed arrays by length, strings two bytes a code unit. */
export function resultBytes(value: Tensor | Table): number {
  if ("columns" in value) {
    let total = 0;
    for (const c of value.columns) {
      if (Array.isArray(c.values)) for (const s of c.values as string[]) total += 16 + 2 * s.length;
      else total += (c.values as Uint8Array).byteLength;
    }
    return total;
  }
  return value.data.byteLength;
}

/** The input's bytes bound what a decoder may hold: 64 per input byte (a bit of an Arrow bool) and 64 KiB. */
export function assertBounded(value: Tensor | Table, input: Uint8Array): void {
  const size = resultBytes(value);
  assert.ok(size <= 64 * input.length + 65536, `a ${input.length}-byte input decoded to ${size} bytes: ${toHex(input).slice(0, 400)}`);
}

/** Runs a decoder: its result, or undefined when it threw a DensewireError; anything else fails the property with the input. */
export async function decodeOrTyped<T>(input: Uint8Array, decode: () => T | Promise<T>): Promise<T | undefined> {
  try {
    return await decode();
  } catch (e) {
    if (e instanceof DensewireError) return undefined;
    throw new Error(`not a DensewireError on input ${toHex(input)}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`, { cause: e });
  }
}

/** fast-check's parameters of every target: bounded by number of inputs, seeded, shrinking findings. */
export function params(): fc.Parameters<[FuzzInput]> {
  return { numRuns: RUNS, seed: SEED, endOnFailure: false };
}
