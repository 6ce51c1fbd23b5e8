/**
 * Base64 (SPEC.md section 5): RFC 4648 standard alphabet, padded on encoding; strict on decoding, with
 * the offset of the offending character on every error.
 *
 * Three backends, picked once at load time, the fastest first:
 * - `native`: `Uint8Array.fromBase64` / `setFromBase64` / `toBase64` (ES2026; recent browsers, Node 25+);
 * - `node`: `Buffer` (Node, Bun, Deno);
 * - `js`: a portable table-driven codec.
 *
 * Decoding writes straight into the caller's buffer. The native and Buffer decoders are lenient (they
 * skip whitespace; Buffer takes the URL-safe alphabet), so the fast path re-encodes what it decoded and
 * accepts the input only if that gives the same string back (canonical Base64, what encoders write):
 * both directions run at memory speed, several times faster than any character loop in JS. Anything
 * else (unpadded or non-zero trailing bits, which are valid; or invalid input) takes the exact path,
 * which checks every rule of section 5 in order and locates the error.
 */
import { DensewireError } from "./errors.js";
import {
  type ByteOrder,
  type DType,
  type Tensor,
  DTYPES,
  bytesOf,
  checkLength,
  checkShape,
  parseByteOrder,
  parseDType,
  rowBytes,
  viewAs,
} from "./dtypes.js";

/** A Base64 implementation: see the module documentation. */
export type Base64Backend = "native" | "node" | "js";

interface NodeBufferLike {
  toString(encoding: "base64"): string;
  write(string: string, offset: number, length: number, encoding: "base64"): number;
}
interface NodeBufferCtor {
  from(buffer: ArrayBufferLike, byteOffset: number, length: number): NodeBufferLike;
}
interface NativeUint8Array {
  toBase64(): string;
  setFromBase64(s: string, options: { lastChunkHandling: "loose" }): { read: number; written: number };
}

const NodeBuffer = (globalThis as { Buffer?: NodeBufferCtor }).Buffer;

/** The backends this runtime has, fastest first. */
export function availableBase64Backends(): Base64Backend[] {
  const out: Base64Backend[] = [];
  const proto = Uint8Array.prototype as unknown as Partial<NativeUint8Array>;
  if (typeof proto.setFromBase64 === "function" && typeof proto.toBase64 === "function") out.push("native");
  if (NodeBuffer !== undefined && typeof NodeBuffer.from === "function") out.push("node");
  out.push("js");
  return out;
}

let backend: Base64Backend = availableBase64Backends()[0]!;

/** The backend in use. */
export function base64Backend(): Base64Backend {
  return backend;
}

/**
 * Selects a backend (`auto`: the fastest available). For tests and benchmarks; throws if the runtime
 * does not have the one asked for.
 */
export function setBase64Backend(which: Base64Backend | "auto"): void {
  const available = availableBase64Backends();
  if (which === "auto") backend = available[0]!;
  else if (available.includes(which)) backend = which;
  else throw new Error(`Base64 backend ${which} is not available here (available: ${available.join(", ")})`);
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) DECODE[ALPHABET.charCodeAt(i)] = i;
const ENCODE = new Uint8Array(64);
for (let i = 0; i < 64; i++) ENCODE[i] = ALPHABET.charCodeAt(i);
const EQ = 61;

function shown(s: string, offset: number): string {
  const ch = s.charCodeAt(offset);
  return ch >= 0x20 && ch < 0x7f ? `'${s[offset]}'` : `U+${ch.toString(16).toUpperCase().padStart(4, "0")}`;
}

function invalid(offset: number, message: string, field?: string): DensewireError {
  return new DensewireError("invalid_base64", message, { offset, field });
}

/**
 * The error of SPEC.md section 5 for `s`, following the rules in order: (1) the first character
 * outside the alphabet and `=`; (2) misplaced or excess padding, at the first `=`; (3) a dangling
 * character, at `len - 1`. Undefined if `s` is valid.
 */
function locate(s: string, field?: string): DensewireError | undefined {
  let p = -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === EQ) {
      if (p < 0) p = i;
    } else if (c >= 128 || DECODE[c]! < 0) {
      return invalid(i, `invalid Base64 character ${shown(s, i)} at offset ${i}`, field);
    }
  }
  if (p >= 0) {
    for (let i = p; i < s.length; i++) {
      if (s.charCodeAt(i) !== EQ) return invalid(p, `misplaced Base64 padding '=' at offset ${p}: data follows it`, field);
    }
    const pads = s.length - p;
    if (pads > 2) return invalid(p, `too much Base64 padding at offset ${p}: ${pads} '=' (at most 2)`, field);
    if (s.length % 4 !== 0) return invalid(p, `Base64 padding at offset ${p} in a string of ${s.length} characters (padded strings are a multiple of 4)`, field);
    if (p % 4 !== 2 && p % 4 !== 3) return invalid(p, `Base64 padding at offset ${p} does not complete the last group`, field);
    return undefined;
  }
  if (s.length % 4 === 1) {
    return invalid(s.length - 1, `dangling Base64 character ${shown(s, s.length - 1)} at offset ${s.length - 1} (a lone character cannot make a byte)`, field);
  }
  return undefined;
}

/** Bytes that a valid string decodes to: 3 per 4 characters, less padding and dangling bits. */
function validLength(s: string): number {
  let p = s.length;
  while (p > 0 && s.charCodeAt(p - 1) === EQ) p--;
  return Math.floor((p * 3) / 4);
}

/**
 * Checks `s` strictly (SPEC.md section 5) and returns the number of bytes it decodes to; throws
 * `invalid_base64` at the offending offset. `field` names the string in errors (e.g. `data[3].embedding`).
 */
export function base64DecodedLength(s: string, field?: string): number {
  const error = locate(s, field);
  if (error !== undefined) throw error;
  return validLength(s);
}

/**
 * The fast path, for canonical input (padded, trailing bits zero: what every encoder writes): decode
 * with the backend into `target`, then accept only if re-encoding gives `s` back, which proves `s`
 * strictly valid in one cheap pass (native codecs run at memory speed; a regular expression or a
 * character loop over the string costs more than the decoding). False sends the caller to the slow,
 * exact path; `target` may then hold garbage.
 */
function decodeCanonical(s: string, target: Uint8Array): boolean {
  const n = target.length;
  if (s.length !== Math.ceil(n / 3) * 4) return false;
  if (n === 0) return true;
  if (backend === "node") {
    const buf = NodeBuffer!.from(target.buffer, target.byteOffset, n);
    if (buf.write(s, 0, n, "base64") !== n) return false;
    return buf.toString("base64") === s;
  }
  if (backend === "native") {
    const t = target as unknown as NativeUint8Array;
    try {
      if (t.setFromBase64(s, { lastChunkHandling: "loose" }).written !== n) return false;
    } catch {
      return false;
    }
    return t.toBase64() === s;
  }
  return decodeJSStrict(s, target);
}

/** Decodes canonical Base64 in portable JS, validating as it goes; false on anything else. */
function decodeJSStrict(s: string, out: Uint8Array): boolean {
  const n = out.length;
  const whole = Math.floor(n / 3);
  let o = 0;
  let i = 0;
  for (let g = 0; g < whole; g++, i += 4) {
    const a = s.charCodeAt(i);
    const b = s.charCodeAt(i + 1);
    const c = s.charCodeAt(i + 2);
    const d = s.charCodeAt(i + 3);
    if ((a | b | c | d) > 127) return false;
    const v = (DECODE[a]! << 18) | (DECODE[b]! << 12) | (DECODE[c]! << 6) | DECODE[d]!;
    if (v < 0) return false; // an invalid character or '=' (-1 sets the sign bit)
    out[o++] = v >>> 16;
    out[o++] = (v >>> 8) & 0xff;
    out[o++] = v & 0xff;
  }
  const rest = n - o; // 1 or 2 bytes: "xx==" or "xxx="
  if (rest === 0) return true;
  const a = s.charCodeAt(i);
  const b = s.charCodeAt(i + 1);
  const c = rest === 2 ? s.charCodeAt(i + 2) : 65; // 'A'
  if ((a | b | c) > 127 || s.charCodeAt(i + 3) !== EQ || (rest === 1 && s.charCodeAt(i + 2) !== EQ)) return false;
  const v = (DECODE[a]! << 18) | (DECODE[b]! << 12) | (DECODE[c]! << 6);
  if (v < 0 || (v & (rest === 2 ? 0xff : 0xffff)) !== 0) return false; // non-zero trailing bits: not canonical
  out[o++] = v >>> 16;
  if (rest === 2) out[o] = (v >>> 8) & 0xff;
  return true;
}

/** Decodes a string already known to be valid (any padding, any trailing bits) into `target`. */
function decodeValid(s: string, target: Uint8Array): void {
  if (target.length === 0) return;
  if (backend === "node") {
    NodeBuffer!.from(target.buffer, target.byteOffset, target.length).write(s, 0, target.length, "base64");
  } else if (backend === "native") {
    (target as unknown as NativeUint8Array).setFromBase64(s, { lastChunkHandling: "loose" });
  } else {
    decodeJS(s, target);
  }
}

function decodeJS(s: string, out: Uint8Array): void {
  const full = Math.floor(out.length / 3) * 4;
  let o = 0;
  let i = 0;
  for (; i < full; i += 4) {
    const v =
      (DECODE[s.charCodeAt(i)]! << 18) |
      (DECODE[s.charCodeAt(i + 1)]! << 12) |
      (DECODE[s.charCodeAt(i + 2)]! << 6) |
      DECODE[s.charCodeAt(i + 3)]!;
    out[o++] = v >>> 16;
    out[o++] = (v >>> 8) & 0xff;
    out[o++] = v & 0xff;
  }
  const rest = out.length - o; // 0, 1 or 2 bytes from a final group of 2 or 3 characters
  if (rest > 0) {
    const v = (DECODE[s.charCodeAt(i)]! << 18) | (DECODE[s.charCodeAt(i + 1)]! << 12) | (rest === 2 ? DECODE[s.charCodeAt(i + 2)]! << 6 : 0);
    out[o++] = v >>> 16;
    if (rest === 2) out[o++] = (v >>> 8) & 0xff;
  }
}

/**
 * Decodes `s` strictly into `target`, whose length is the byte length the caller expects:
 * `invalid_base64` at the offending character, then `length_mismatch` at `min(actual, expected)`.
 */
export function decodeBase64Into(s: string, target: Uint8Array, field?: string): void {
  if (decodeCanonical(s, target)) return;
  checkLength(base64DecodedLength(s, field), target.length, field);
  decodeValid(s, target);
}

/** Decodes `s` strictly (SPEC.md section 5) to a fresh `Uint8Array`. */
export function base64ToBytes(s: string, field?: string): Uint8Array {
  const guess = new Uint8Array(validLength(s));
  if (decodeCanonical(s, guess)) return guess;
  const out = new Uint8Array(base64DecodedLength(s, field));
  decodeValid(s, out);
  return out;
}

/** Encodes bytes as padded standard Base64 (SPEC.md section 5). */
export function bytesToBase64(bytes: Uint8Array): string {
  if (bytes.length === 0) return "";
  if (backend === "node") return NodeBuffer!.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("base64");
  if (backend === "native") return (bytes as unknown as NativeUint8Array).toBase64();
  return encodeJS(bytes);
}

function encodeJS(bytes: Uint8Array): string {
  const chunks: string[] = [];
  const CHUNK = 12288; // bytes per chunk: a multiple of 3
  const buf = new Uint8Array((CHUNK / 3) * 4);
  for (let start = 0; start < bytes.length; start += CHUNK) {
    const end = Math.min(start + CHUNK, bytes.length);
    let o = 0;
    let i = start;
    for (; i + 3 <= end; i += 3) {
      const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
      buf[o++] = ENCODE[v >>> 18]!;
      buf[o++] = ENCODE[(v >>> 12) & 63]!;
      buf[o++] = ENCODE[(v >>> 6) & 63]!;
      buf[o++] = ENCODE[v & 63]!;
    }
    if (i < end) {
      const two = i + 1 < end;
      const v = (bytes[i]! << 16) | (two ? bytes[i + 1]! << 8 : 0);
      buf[o++] = ENCODE[v >>> 18]!;
      buf[o++] = ENCODE[(v >>> 12) & 63]!;
      buf[o++] = two ? ENCODE[(v >>> 6) & 63]! : EQ;
      buf[o++] = EQ;
    }
    chunks.push(String.fromCharCode.apply(null, buf.subarray(0, o) as unknown as number[]));
  }
  return chunks.join("");
}

/** Options of {@link decodeBase64}: the shape is always stated by the sender (SPEC.md section 1). */
export interface Base64DecodeOptions {
  dtype: DType | string;
  shape: readonly [number, number] | readonly number[];
  /** Byte order of the items in the string; default `little`. */
  byteorder?: ByteOrder | string;
}

/**
 * Decodes a whole tensor carried as one Base64 string (rows concatenated). The result's data is a
 * typed array over the freshly decoded buffer (big-endian input is swapped in place: no extra copy).
 */
export function decodeBase64(s: string, options: Base64DecodeOptions): Tensor {
  const dtype = parseDType(options.dtype);
  const byteorder = parseByteOrder(options.byteorder ?? "little");
  const [n, d] = checkShape(options.shape);
  if (typeof s !== "string") throw new DensewireError("invalid_field", "Base64 input must be a string");
  const bytes = new Uint8Array(n * rowBytes(dtype, d));
  decodeBase64Into(s, bytes);
  return { dtype, shape: [n, d], data: viewAs(bytes, dtype, byteorder, true) } as Tensor;
}

/** Encodes a tensor's data as one Base64 string in the given byte order (default `little`). */
export function encodeBase64(tensor: Tensor, options: { byteorder?: ByteOrder } = {}): string {
  const byteorder = parseByteOrder(options.byteorder ?? "little");
  return bytesToBase64(bytesOf(tensor.data, DTYPES[tensor.dtype].itemBytes, byteorder));
}
