/**
 * The JSON embeddings envelope (SPEC.md section 6): the OpenAI-compatible response of
 * `POST /v1/embeddings`, with rows as arrays of numbers (`encoding_format: "float"`) or as Base64
 * strings (`"base64"`), plus densewire's `dtype`, `byteorder` and `dimensions` (defaulted when absent,
 * as OpenAI does not send them). Rows are placed by `index`.
 *
 * Decoding writes every row straight into one typed array (Base64 rows are decoded in place, no
 * per-row buffers); number rows are rounded from float64 to the dtype once (section 3.5). int8 and
 * uint8 rows a server quantized carry the id of their ranges in `quantization`.
 */
import { decodeBase64Into, base64DecodedLength, bytesToBase64 } from "./base64.js";
import { float32BitsToNumber, float64ToFloat16Bits, float64ToBfloat16Bits, float16BitsToFloat32Bits } from "./convert.js";
import {
  type ByteOrder,
  type DType,
  type Embeddings,
  type Tensor,
  type Usage,
  DTYPES,
  LITTLE_ENDIAN_HOST,
  allocData,
  bytesOf,
  checkNoKind,
  describe,
  parseByteOrder,
  parseDType,
  parseUsage,
  rowBytes,
  swapBytes,
} from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { checkQuantization, readQuantizationId } from "./quantization.js";

/** `encoding_format` of the request and envelope. */
export type EncodingFormat = "float" | "base64";

/** Options of {@link encodeJSON}. */
export interface JSONEncodeOptions {
  /** `float` (arrays of numbers, the OpenAI default) or `base64`; default `base64`. */
  encodingFormat?: EncodingFormat;
  /** Byte order of Base64 rows; default `little`. Number rows are always written as `little`. */
  byteorder?: ByteOrder;
  /** The model id; default the tensor's `model`, else "". */
  model?: string;
  /** Token counts; default the tensor's `usage`, else zeros. */
  usage?: Usage;
  /** The quantization id (written after `dimensions`; servers give it for int8/uint8); default the tensor's `quantization`. */
  quantization?: string;
}

const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true });

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Decodes a JSON embeddings envelope: the JSON text (string or UTF-8 bytes) or an already parsed value.
 * Errors: `malformed` (not JSON, or `NaN`/`Infinity` tokens), `invalid_field`, `unknown_dtype`,
 * `shape_mismatch`, `invalid_base64` and `length_mismatch`, each with its JSON path in `field`.
 */
export function decodeJSON(input: string | Uint8Array | ArrayBuffer | object): Embeddings {
  let doc: unknown = input;
  if (input instanceof ArrayBuffer || ArrayBuffer.isView(input)) {
    const bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    try {
      doc = utf8.decode(bytes);
    } catch (e) {
      throw new DensewireError("malformed", "JSON body is not valid UTF-8", {}, { cause: e });
    }
  }
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch (e) {
      throw new DensewireError("malformed", `not valid JSON: ${(e as Error).message}`, {}, { cause: e });
    }
  }
  if (!isObject(doc)) throw new DensewireError("malformed", `the envelope must be a JSON object, got ${describe(doc)}`);
  checkNoKind(Object.hasOwn(doc, "kind"), doc["kind"], "kind");

  const data = doc["data"];
  if (!Array.isArray(data)) throw new DensewireError("invalid_field", data === undefined ? "missing" : `must be an array, got ${describe(data)}`, { field: "data" });
  const dtype = doc["dtype"] == null ? "float32" : parseDType(doc["dtype"]);
  const byteorder = doc["byteorder"] == null ? "little" : parseByteOrder(doc["byteorder"]);
  const n = data.length;
  let d: number;
  const dims = doc["dimensions"];
  if (dims != null) {
    if (!Number.isSafeInteger(dims) || (dims as number) < 0) {
      throw new DensewireError("invalid_field", `must be a non-negative integer, got ${describe(dims)}`, { field: "dimensions" });
    }
    d = dims as number;
  } else {
    d = n === 0 ? 0 : firstRowDimensions(data[0], dtype);
  }

  const rb = rowBytes(dtype, d);
  const width = dtype === "binary" ? rb : d; // items per row in `out`
  checkRowsCanFill(data, dtype, d, rb, width);
  const out = allocData(dtype, n * width);
  const outBytes = new Uint8Array(out.buffer, 0, out.byteLength);
  const itemBytes = DTYPES[dtype].itemBytes;
  const swap = itemBytes > 1 && (byteorder === "little") !== LITTLE_ENDIAN_HOST;
  const seen = new Uint8Array(n);

  for (let i = 0; i < n; i++) {
    const item: unknown = data[i];
    if (!isObject(item)) throw new DensewireError("invalid_field", `must be an object, got ${describe(item)}`, { field: `data[${i}]` });
    const index = item["index"];
    if (typeof index !== "number") {
      throw new DensewireError("invalid_field", index === undefined ? "missing" : `must be an integer, got ${describe(index)}`, { field: `data[${i}].index` });
    }
    if (!Number.isInteger(index) || index < 0 || index >= n) {
      throw new DensewireError("shape_mismatch", `index ${index} is outside [0, ${n})`, { field: `data[${i}].index` });
    }
    if (seen[index] === 1) throw new DensewireError("shape_mismatch", `index ${index} occurs twice`, { field: `data[${i}].index` });
    seen[index] = 1;
    const emb = item["embedding"];
    const field = `data[${i}].embedding`;
    if (typeof emb === "string") {
      const target = outBytes.subarray(index * rb, (index + 1) * rb);
      decodeBase64Into(emb, target, field);
      if (swap) swapBytes(target, itemBytes);
    } else if (Array.isArray(emb)) {
      fillRow(dtype, out, index * width, emb, field); // its length was checked by checkRowsCanFill
    } else {
      throw new DensewireError("invalid_field", `must be an array of numbers or a Base64 string, got ${describe(emb)}`, { field });
    }
  }

  const result = { dtype, shape: [n, d], data: out } as Embeddings;
  if (typeof doc["model"] === "string") result.model = doc["model"];
  const usage = parseUsage(doc["usage"]);
  if (usage !== undefined) result.usage = usage;
  const quantization = readQuantizationId(doc["quantization"], "quantization");
  if (quantization !== undefined) result.quantization = quantization;
  return result;
}

/**
 * Fails on the first row that cannot fill its `rb` bytes, before the tensor is allocated: a declared
 * `dimensions` far beyond what the rows carry (fuzzing found 2222222222222220) is that row's error,
 * not a RangeError or an allocation of petabytes. Number rows are checked in full here; Base64 rows
 * that could be long enough are checked as they are decoded.
 */
function checkRowsCanFill(data: unknown[], dtype: DType, d: number, rb: number, width: number): void {
  for (let i = 0; i < data.length; i++) {
    const item = data[i];
    const emb = isObject(item) ? item["embedding"] : undefined;
    const field = `data[${i}].embedding`;
    if (Array.isArray(emb) && emb.length !== width) {
      throw new DensewireError(
        "shape_mismatch",
        `row has ${emb.length} ${dtype === "binary" ? "packed bytes" : "items"}, expected ${width} (d = ${d})`,
        { field },
      );
    }
    if (typeof emb === "string" && Math.floor(emb.length / 4) * 3 + 3 < rb) {
      const bytes = base64DecodedLength(emb, field);
      throw new DensewireError("length_mismatch", `${bytes} bytes where a ${dtype} row of ${d} dimensions needs ${rb}`, {
        offset: Math.min(bytes, rb),
        field,
      });
    }
  }
}

/** `d` from the first row when `dimensions` is absent (SPEC.md section 6.2). */
function firstRowDimensions(item: unknown, dtype: DType): number {
  const emb = isObject(item) ? item["embedding"] : undefined;
  const field = "data[0].embedding";
  if (typeof emb === "string") {
    const bytes = base64DecodedLength(emb, field);
    if (dtype === "binary") return bytes * 8;
    const size = DTYPES[dtype].itemBytes;
    if (bytes % size !== 0) {
      const whole = bytes - (bytes % size);
      throw new DensewireError("length_mismatch", `${bytes} bytes is not a whole number of ${dtype} items`, { offset: whole, field });
    }
    return bytes / size;
  }
  if (Array.isArray(emb)) return dtype === "binary" ? emb.length * 8 : emb.length;
  return 0; // the row loop reports the bad item
}

function badItem(dtype: DType, v: unknown, field: string, j: number): DensewireError {
  if (typeof v !== "number") return new DensewireError("invalid_field", `must be a number, got ${describe(v)}`, { field: `${field}[${j}]` });
  const range = dtype === "int8" ? "[-128, 127]" : "[0, 255]";
  return new DensewireError("invalid_field", `must be an integer in ${range} (${dtype}), got ${v}`, { field: `${field}[${j}]` });
}

/** Writes one row of JSON numbers into `out` at `at` (one specialised loop per dtype: this is the hot path). */
export function fillRow(dtype: DType, out: Tensor["data"], at: number, row: unknown[], field: string): void {
  const w = row.length;
  switch (dtype) {
    case "float32":
    case "float64":
      // a float32 store rounds the float64 JSON value to nearest, ties to even (section 3.5)
      for (let j = 0; j < w; j++) {
        const v = row[j];
        if (typeof v !== "number") throw badItem(dtype, v, field, j);
        out[at + j] = v;
      }
      return;
    case "float16":
    case "bfloat16": {
      const round = dtype === "float16" ? float64ToFloat16Bits : float64ToBfloat16Bits;
      for (let j = 0; j < w; j++) {
        const v = row[j];
        if (typeof v !== "number") throw badItem(dtype, v, field, j);
        out[at + j] = round(v);
      }
      return;
    }
    default: {
      const lo = dtype === "int8" ? -128 : 0;
      const hi = dtype === "int8" ? 127 : 255;
      for (let j = 0; j < w; j++) {
        const v = row[j];
        if (typeof v !== "number" || !Number.isInteger(v) || v < lo || v > hi) throw badItem(dtype, v, field, j);
        out[at + j] = v;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------- encoding

/**
 * The shortest decimal that reads back (as float64, then rounded to the dtype) to the same bits.
 *
 * The number of digits is found with float arithmetic (round to p significant digits, p = 1, 2, ...:
 * cheap), then written with `toPrecision(p)`, the exact nearest p-digit decimal, and kept only if it reads
 * back; otherwise an exact `toPrecision` search continues from there. The output always reads back to the
 * same bits; it is the shortest except in rare cases where float rounding makes the first search settle a
 * digit late (SPEC.md section 3.5: any decimal that reads back to the same bits is conformant).
 */
function shortest(value: number, readsBack: (x: number) => boolean, maxDigits: number): string {
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const e = Math.floor(Math.log10(Math.abs(value)));
  let p = 1;
  for (; p < maxDigits; p++) {
    const k = p - 1 - e;
    const candidate = k >= 0 ? Math.round(value * POW10[k]!) / POW10[k]! : Math.round(value / POW10[-k]!) * POW10[-k]!;
    if (readsBack(candidate)) break;
  }
  for (; p <= 17; p++) {
    const s = value.toPrecision(p);
    const x = Number(s);
    if (readsBack(x)) {
      if (s.indexOf("e") < 0) return s;
      const plain = String(x); // "65500" rather than "6.55e+4" when that is not longer
      return plain.length <= s.length ? plain : s;
    }
  }
  return String(value);
}

const POW10 = Array.from({ length: 400 }, (_, i) => Number(`1e${i}`)); // exact up to 1e22, nearest beyond

export function numberRow(dtype: DType, data: Tensor["data"], start: number, width: number, i: number): string {
  const parts = new Array<string>(width);
  const u32 = dtype === "float32" ? new Uint32Array(data.buffer, data.byteOffset, data.length) : undefined;
  for (let j = 0; j < width; j++) {
    const raw = data[start + j]!;
    let s: string;
    switch (dtype) {
      case "float32": {
        const v = raw;
        if (!Number.isFinite(v)) throw nonFinite(i, j, u32![start + j]!.toString(16));
        s = shortest(v, (x) => Math.fround(x) === v, 9);
        break;
      }
      case "float64":
        if (!Number.isFinite(raw)) throw nonFinite(i, j, String(raw));
        s = Object.is(raw, -0) ? "-0.0" : String(raw);
        break;
      case "float16":
      case "bfloat16": {
        const v = float32BitsToNumber(dtype === "float16" ? float16BitsToFloat32Bits(raw) : raw << 16);
        if (!Number.isFinite(v)) throw nonFinite(i, j, raw.toString(16).padStart(4, "0"));
        const round = dtype === "float16" ? float64ToFloat16Bits : float64ToBfloat16Bits;
        s = shortest(v, (x) => round(x) === raw, 5);
        break;
      }
      default:
        s = String(raw);
    }
    parts[j] = s;
  }
  return "[" + parts.join(",") + "]";
}

function nonFinite(i: number, j: number, bits: string): DensewireError {
  return new DensewireError("non_finite", `NaN and infinities have no JSON number form (bits 0x${bits}); use encoding_format "base64"`, {
    field: `data[${i}].embedding[${j}]`,
  });
}

/**
 * Encodes a tensor as a JSON embeddings envelope (compact, keys in SPEC.md order). `float` rows fail
 * with `non_finite` on NaN and infinities; `base64` rows carry every bit.
 */
export function encodeJSON(tensor: Tensor | Embeddings, options: JSONEncodeOptions = {}): string {
  const format = options.encodingFormat ?? "base64";
  if (format !== "float" && format !== "base64") {
    throw new DensewireError("invalid_field", `encoding_format must be "float" or "base64", got ${describe(format)}`, { field: "encoding_format" });
  }
  const byteorder = format === "base64" ? parseByteOrder(options.byteorder ?? "little") : "little";
  const { dtype, data } = tensor;
  const [n, d] = tensor.shape;
  const rb = rowBytes(dtype, d);
  const width = dtype === "binary" ? rb : d;
  const model = options.model ?? (tensor as Embeddings).model ?? "";
  const usage = options.usage ?? (tensor as Embeddings).usage ?? { prompt_tokens: 0, total_tokens: 0 };
  const quantization = checkQuantization(options.quantization ?? (tensor as Embeddings).quantization);
  const rows = new Array<string>(n);
  const bytes = format === "base64" ? bytesOf(data, DTYPES[dtype].itemBytes, byteorder) : undefined;
  for (let i = 0; i < n; i++) {
    const emb = bytes !== undefined ? '"' + bytesToBase64(bytes.subarray(i * rb, (i + 1) * rb)) + '"' : numberRow(dtype, data, i * width, width, i);
    rows[i] = `{"object":"embedding","index":${i},"embedding":${emb}}`;
  }
  return (
    `{"object":"list","data":[${rows.join(",")}],"model":${JSON.stringify(model)},` +
    `"usage":{"prompt_tokens":${usage.prompt_tokens},"total_tokens":${usage.total_tokens}},` +
    `"dtype":"${dtype}","byteorder":"${byteorder}","dimensions":${d}` +
    (quantization === undefined ? "}" : `,"quantization":${JSON.stringify(quantization)}}`)
  );
}
