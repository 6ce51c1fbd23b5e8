/**
 * MessagePack (SPEC.md section 8), on @msgpack/msgpack: one map `{model?, dtype, shape, data, usage?,
 * quantization?}`.
 *
 * Decoding: @msgpack/msgpack returns `data` (a bin) as a subarray of the body, so the tensor is a view
 * over the body when the bin payload is aligned for the dtype (always for int8, uint8 and binary), and
 * one copy otherwise (the map's header bytes usually leave float data unaligned). When the library
 * rejects a body, a structural scan locates the error (`truncated` at the body's length, `malformed`
 * at the offending byte). Encoding writes the smallest representation of each value, so the body is
 * byte-exact with every other implementation.
 */
import { Decoder, Encoder } from "@msgpack/msgpack";
import { type Embeddings, type Tensor, type Usage, checkLength, checkNoKind, describe, parseDType, parseUsage, rowBytes, viewAs, DTYPES, bytesOf } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { checkQuantization } from "./quantization.js";

const decoder = new Decoder({
  mapKeyConverter: (key: unknown): string => {
    if (typeof key !== "string") throw new TypeError(`map key is not a str: ${describe(key)}`);
    return key;
  },
});

/** Whether a decoded MessagePack value is a map (as @msgpack/msgpack returns it). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Decodes a body that must be one MessagePack map with str keys (tensors, section 8; tables, section
 * 15.5); a body that is not is `malformed` or `truncated` at the offending offset.
 */
export function decodeMsgpackMap(bytes: Uint8Array): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = decoder.decode(bytes);
  } catch (e) {
    throw locateError(bytes) ?? new DensewireError("malformed", `not valid MessagePack: ${(e as Error).message}`, {}, { cause: e });
  }
  if (!isPlainObject(doc)) throw new DensewireError("malformed", `the body must be a map, got ${describe(doc)}`, { offset: 0 });
  return doc;
}

/**
 * Decodes a MessagePack tensor or embeddings body. Errors: `malformed` (not a map, a key not a str,
 * trailing bytes) and `truncated` with offsets; `invalid_field` on `data`, `shape`, `dtype`, `model`,
 * `usage`, `quantization`; `unknown_dtype`; `length_mismatch` on `data`.
 */
export function decodeMsgpack(body: Uint8Array | ArrayBuffer): Embeddings {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const doc = decodeMsgpackMap(bytes);
  checkNoKind(Object.hasOwn(doc, "kind"), doc["kind"], "kind");

  if (!("dtype" in doc)) throw new DensewireError("invalid_field", "missing", { field: "dtype" });
  if (typeof doc["dtype"] !== "string") throw new DensewireError("invalid_field", `must be a str, got ${describe(doc["dtype"])}`, { field: "dtype" });
  const dtype = parseDType(doc["dtype"]);
  const shape = doc["shape"];
  if (!Array.isArray(shape) || shape.length !== 2 || !isCount(shape[0]) || !isCount(shape[1])) {
    throw new DensewireError("invalid_field", `must be an array of two non-negative integers [n, d], got ${describe(shape)}`, { field: "shape" });
  }
  const [n, d] = shape as [number, number];
  const data = doc["data"];
  if (!(data instanceof Uint8Array)) {
    throw new DensewireError("invalid_field", data === undefined ? "missing" : `must be a bin, got ${describe(data)}`, { field: "data" });
  }
  checkLength(data.length, n * rowBytes(dtype, d), "data");
  const result = { dtype, shape: [n, d], data: viewAs(data, dtype, "little") } as Embeddings;
  if ("model" in doc) {
    if (typeof doc["model"] !== "string") throw new DensewireError("invalid_field", `must be a str, got ${describe(doc["model"])}`, { field: "model" });
    result.model = doc["model"];
  }
  const usage = parseUsage(doc["usage"]);
  if (usage !== undefined) {
    // MessagePack types its numbers: a float count (even 2.0) is not an integer, although the
    // decoder hands it over as one (section 8)
    const float = floatUsageCount(bytes);
    if (float !== undefined) throw new DensewireError("invalid_field", "must be a MessagePack integer, got a float", { field: `usage.${float}` });
    result.usage = usage;
  }
  if ("quantization" in doc) {
    const q = doc["quantization"];
    if (typeof q !== "string") throw new DensewireError("invalid_field", `must be a str, got ${describe(q)}`, { field: "quantization" });
    result.quantization = q;
  }
  return result;
}

/**
 * Encodes a tensor (with `model`, `usage` and, for quantized int8/uint8 rows, `quantization` for an
 * embeddings response) as a MessagePack body.
 */
export function encodeMsgpack(tensor: Tensor | Embeddings, options: { model?: string; usage?: Usage; quantization?: string } = {}): Uint8Array {
  const { dtype } = tensor;
  const [n, d] = tensor.shape;
  const data = bytesOf(tensor.data, DTYPES[dtype].itemBytes, "little");
  checkLength(data.length, n * rowBytes(dtype, d), "data");
  const model = options.model ?? (tensor as Embeddings).model;
  const usage = options.usage ?? (tensor as Embeddings).usage;
  const doc: Record<string, unknown> = {};
  if (model !== undefined) doc["model"] = model;
  doc["dtype"] = dtype;
  doc["shape"] = [n, d];
  doc["data"] = data;
  if (usage !== undefined) doc["usage"] = { prompt_tokens: usage.prompt_tokens, total_tokens: usage.total_tokens };
  const quantization = checkQuantization(options.quantization ?? (tensor as Embeddings).quantization);
  if (quantization !== undefined) doc["quantization"] = quantization;
  // a fresh encoder sized for the body: its buffer is returned as is (no regrowth, no final copy)
  const encoder = new Encoder({ initialBufferSize: data.length + 256 + (model?.length ?? 0) * 3 });
  return encoder.encodeSharedRef(doc);
}

/**
 * The end of the value at `pos` in a body the decoder already accepted (so it is complete): one
 * value's head at a time, its nested values counted, not recursed into.
 */
function valueEnd(b: Uint8Array, dv: DataView, pos: number): number {
  for (let pending = 1; pending > 0; pending--) {
    const [children, end] = valueHead(b, dv, pos);
    pending += children;
    pos = end;
  }
  return pos;
}

/** The nested values a value's head opens, and where its head (with any payload) ends. */
function valueHead(b: Uint8Array, dv: DataView, pos: number): [number, number] {
  const t = b[pos]!;
  const u = (at: number, k: number) => (k === 1 ? b[at]! : k === 2 ? dv.getUint16(at) : dv.getUint32(at));
  let children = 0;
  let end: number;
  if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) end = pos + 1;
  else if (t >= 0x80 && t <= 0x8f) (children = 2 * (t & 0x0f)), (end = pos + 1);
  else if (t >= 0x90 && t <= 0x9f) (children = t & 0x0f), (end = pos + 1);
  else if (t >= 0xa0 && t <= 0xbf) end = pos + 1 + (t & 0x1f);
  else {
    const lenBytes: Record<number, number> = { 0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4 };
    const extBytes: Record<number, number> = { 0xc7: 1, 0xc8: 2, 0xc9: 4 };
    const fixed: Record<number, number> = { 0xca: 4, 0xcb: 8, 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xd4: 2, 0xd5: 3, 0xd6: 5, 0xd7: 9, 0xd8: 17 };
    if (t in lenBytes) end = pos + 1 + lenBytes[t]! + u(pos + 1, lenBytes[t]!);
    else if (t in extBytes) end = pos + 2 + extBytes[t]! + u(pos + 1, extBytes[t]!);
    else if (t in fixed) end = pos + 1 + fixed[t]!;
    else if (t === 0xdc || t === 0xde) (children = u(pos + 1, 2) * (t === 0xde ? 2 : 1)), (end = pos + 3);
    else (children = u(pos + 1, 4) * (t === 0xdf ? 2 : 1)), (end = pos + 5); // 0xdd, 0xdf
  }
  return [children, end];
}

/** The name of a usage count written as a MessagePack float (0xca, 0xcb), in a decoded body. */
export function floatUsageCount(b: Uint8Array): string | undefined {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const str = (pos: number): [string, number] | undefined => {
    const t = b[pos]!;
    const [len, at] = t >= 0xa0 && t <= 0xbf ? [t & 0x1f, pos + 1] : t === 0xd9 ? [b[pos + 1]!, pos + 2] : [-1, 0];
    return len < 0 || len > 16 ? undefined : [String.fromCharCode(...b.subarray(at, at + len)), at + len];
  };
  const entries = (pos: number): [number, number] => {
    const t = b[pos]!;
    return t <= 0x8f ? [t & 0x0f, pos + 1] : t === 0xde ? [dv.getUint16(pos + 1), pos + 3] : [dv.getUint32(pos + 1), pos + 5];
  };
  let [count, pos] = entries(0);
  for (let i = 0; i < count; i++) {
    const key = str(pos);
    const valuePos = key?.[1] ?? valueEnd(b, dv, pos);
    if (key?.[0] === "usage") {
      let [inner, p] = entries(valuePos); // a map: parseUsage checked it
      for (let j = 0; j < inner; j++) {
        const k = str(p);
        const vp = k?.[1] ?? valueEnd(b, dv, p);
        if ((k?.[0] === "prompt_tokens" || k?.[0] === "total_tokens") && (b[vp] === 0xca || b[vp] === 0xcb)) return k[0];
        p = valueEnd(b, dv, vp);
      }
    }
    pos = valueEnd(b, dv, valuePos);
  }
  return undefined;
}

// ------------------------------------------------------------------------- error location (slow path)

/**
 * Walks the body's structure to name the error precisely: `truncated` at `len(body)` when it ends
 * early, `malformed` at the first byte of a value that is not allowed (a top level other than a map,
 * a map key other than a str, the unused type 0xc1, trailing bytes). Undefined if it finds none.
 */
export function locateError(b: Uint8Array): DensewireError | undefined {
  const truncated = () => new DensewireError("truncated", `the body ended after ${b.length} bytes, before the value was complete`, { offset: b.length });
  const malformed = (offset: number, why: string) => new DensewireError("malformed", `${why} at byte ${offset}`, { offset });
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let pos = 0;
  const need = (k: number) => {
    if (pos + k > b.length) throw truncated();
  };
  const uint = (k: number) => {
    need(k);
    const v = k === 1 ? b[pos]! : k === 2 ? dv.getUint16(pos) : dv.getUint32(pos);
    pos += k;
    return v;
  };
  // one value's head: returns the number of nested values it opens, and whether they alternate key/value
  const head = (): { children: number; map: boolean; str: boolean; key?: string } => {
    const start = pos;
    need(1);
    const t = b[pos++]!;
    const skip = (k: number) => {
      need(k);
      pos += k;
    };
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) return { children: 0, map: false, str: false };
    if (t >= 0x80 && t <= 0x8f) return { children: 2 * (t & 0x0f), map: true, str: false };
    if (t >= 0x90 && t <= 0x9f) return { children: t & 0x0f, map: false, str: false };
    if ((t >= 0xa0 && t <= 0xbf) || t === 0xd9 || t === 0xda || t === 0xdb) {
      const len = t <= 0xbf ? t & 0x1f : uint(t === 0xd9 ? 1 : t === 0xda ? 2 : 4);
      need(len);
      const key = len === 9 ? String.fromCharCode(...b.subarray(pos, pos + 9)) : undefined;
      pos += len;
      return { children: 0, map: false, str: true, key };
    }
    switch (t) {
      case 0xc4: case 0xc5: case 0xc6: skip(uint(t === 0xc4 ? 1 : t === 0xc5 ? 2 : 4)); break; // bin
      case 0xc7: case 0xc8: case 0xc9: skip(uint(t === 0xc7 ? 1 : t === 0xc8 ? 2 : 4) + 1); break; // ext
      case 0xca: skip(4); break;
      case 0xcb: skip(8); break;
      case 0xcc: case 0xd0: skip(1); break;
      case 0xcd: case 0xd1: skip(2); break;
      case 0xce: case 0xd2: skip(4); break;
      case 0xcf: case 0xd3: skip(8); break;
      case 0xd4: skip(2); break; // fixext 1..16: type byte + data
      case 0xd5: skip(3); break;
      case 0xd6: skip(5); break;
      case 0xd7: skip(9); break;
      case 0xd8: skip(17); break;
      case 0xdc: return { children: uint(2), map: false, str: false };
      case 0xdd: return { children: uint(4), map: false, str: false };
      case 0xde: return { children: 2 * uint(2), map: true, str: false };
      case 0xdf: return { children: 2 * uint(4), map: true, str: false };
      default: throw malformed(start, "type byte 0xc1 (never used)");
    }
    return { children: 0, map: false, str: false };
  };
  try {
    need(1);
    const t = b[0]!;
    if (!((t >= 0x80 && t <= 0x8f) || t === 0xde || t === 0xdf)) throw malformed(0, `the body is not a map (type byte 0x${t.toString(16)})`);
    // a stack of open containers: values still to read, and whether the next one is a map key
    const stack: { left: number; map: boolean }[] = [];
    let first = true;
    do {
      const top = stack[stack.length - 1];
      const isKey = top !== undefined && top.map && top.left % 2 === 0;
      const start = pos;
      const h = head();
      if (isKey && !h.str) throw malformed(start, "a map key is not a str");
      if (isKey && h.key === "__proto__") throw malformed(start, "the map key __proto__ is not allowed");
      if (top !== undefined) top.left--;
      if (first || h.children > 0) stack.push({ left: h.children, map: h.map });
      first = false;
      while (stack.length > 0 && stack[stack.length - 1]!.left === 0) stack.pop();
    } while (stack.length > 0);
    if (pos < b.length) throw malformed(pos, `${b.length - pos} byte(s) after the map`);
  } catch (e) {
    if (e instanceof DensewireError) return e;
    throw e;
  }
  return undefined;
}
