/**
 * The raw body (SPEC.md section 7): the tensor's little-endian bytes and nothing else, described by
 * `Densewire-*` headers. Decoding is zero-copy: the result is a typed array over the body's memory
 * whenever the body is aligned for the dtype (a `fetch` `arrayBuffer()` always is).
 */
import {
  type Embeddings,
  type Tensor,
  type Usage,
  DTYPES,
  bytesOf,
  checkLength,
  checkNoKind,
  parseDType,
  rowBytes,
  viewAs,
} from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { checkQuantization, readQuantizationId } from "./quantization.js";

/** Headers as `fetch` gives them, a plain object, or a Map; names are matched case-insensitively. */
export type HeadersInput = { get(name: string): string | null | undefined } | Record<string, string | string[] | undefined>;

/** Reads a header case-insensitively from any {@link HeadersInput}. */
export function getHeader(headers: HeadersInput, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === "function") {
    const h = headers as { get(name: string): string | null | undefined };
    const v = h.get(name) ?? h.get(name.toLowerCase());
    return v ?? undefined;
  }
  const lower = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === lower) return Array.isArray(v) ? v.join(", ") : v;
  }
  return undefined;
}

const SHAPE = /^(0|[1-9][0-9]*),(0|[1-9][0-9]*)$/;
const COUNT = /^(0|[1-9][0-9]*)$/;

/**
 * Decodes a raw body with its headers. Errors: `invalid_field` naming a missing or malformed
 * `Densewire-Dtype`/`Densewire-Shape` header or a `Densewire-Byteorder` other than `little`,
 * `unknown_dtype` on `Densewire-Dtype`, `length_mismatch` with the byte offset.
 */
export function decodeRaw(body: Uint8Array | ArrayBuffer, headers: HeadersInput): Embeddings {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const kindHeader = getHeader(headers, "Densewire-Kind");
  checkNoKind(kindHeader !== undefined, kindHeader, "Densewire-Kind");
  const dtypeHeader = getHeader(headers, "Densewire-Dtype");
  if (dtypeHeader === undefined) {
    throw new DensewireError("invalid_field", "missing header (the dtype of the body)", { field: "Densewire-Dtype" });
  }
  const dtype = parseDType(dtypeHeader.trim(), "Densewire-Dtype");
  const shapeHeader = getHeader(headers, "Densewire-Shape");
  const m = shapeHeader === undefined ? null : SHAPE.exec(shapeHeader.trim());
  if (m === null) {
    throw new DensewireError(
      "invalid_field",
      shapeHeader === undefined ? "missing header (n,d of the body)" : `must be "n,d" in decimal, got ${JSON.stringify(shapeHeader)}`,
      { field: "Densewire-Shape" },
    );
  }
  const n = Number(m[1]);
  const d = Number(m[2]);
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(d)) {
    throw new DensewireError("invalid_field", `shape ${shapeHeader} is out of range`, { field: "Densewire-Shape" });
  }
  const order = getHeader(headers, "Densewire-Byteorder");
  if (order !== undefined && order.trim() !== "little") {
    throw new DensewireError("invalid_field", `raw bodies are little-endian, got ${JSON.stringify(order)}`, { field: "Densewire-Byteorder" });
  }
  checkLength(bytes.length, n * rowBytes(dtype, d));
  const result = { dtype, shape: [n, d], data: viewAs(bytes, dtype, "little") } as Embeddings;
  const model = getHeader(headers, "Densewire-Model");
  if (model !== undefined) result.model = model;
  const pt = getHeader(headers, "Densewire-Prompt-Tokens");
  const tt = getHeader(headers, "Densewire-Total-Tokens");
  if (pt !== undefined || tt !== undefined) {
    result.usage = { prompt_tokens: count(pt, "Densewire-Prompt-Tokens"), total_tokens: count(tt, "Densewire-Total-Tokens") };
  }
  const quantization = readQuantizationId(getHeader(headers, "Densewire-Quantization")?.trim(), "Densewire-Quantization");
  if (quantization !== undefined) result.quantization = quantization;
  return result;
}

function count(value: string | undefined, field: string): number {
  if (value === undefined || !COUNT.test(value.trim())) {
    throw new DensewireError("invalid_field", `must be a decimal integer, got ${JSON.stringify(value ?? null)}`, { field });
  }
  return Number(value.trim());
}

/** A raw body and the headers that describe it. */
export interface RawMessage {
  /** The little-endian bytes: a view over the tensor's memory on little-endian hosts (no copy). */
  body: Uint8Array;
  /** `Densewire-*` headers in SPEC.md order (model, token counts and quantization id when given). */
  headers: Record<string, string>;
}

/** Encodes a tensor as a raw body and its headers (SPEC.md section 7). */
export function encodeRaw(tensor: Tensor | Embeddings, options: { model?: string; usage?: Usage; quantization?: string } = {}): RawMessage {
  const { dtype } = tensor;
  const [n, d] = tensor.shape;
  const body = bytesOf(tensor.data, DTYPES[dtype].itemBytes, "little");
  checkLength(body.length, n * rowBytes(dtype, d), "data");
  const headers: Record<string, string> = {
    "Densewire-Version": "1",
    "Densewire-Dtype": dtype,
    "Densewire-Shape": `${n},${d}`,
    "Densewire-Byteorder": "little",
  };
  const model = options.model ?? (tensor as Embeddings).model;
  const usage = options.usage ?? (tensor as Embeddings).usage;
  const quantization = checkQuantization(options.quantization ?? (tensor as Embeddings).quantization);
  if (model !== undefined) headers["Densewire-Model"] = model;
  if (usage !== undefined) {
    headers["Densewire-Prompt-Tokens"] = String(usage.prompt_tokens);
    headers["Densewire-Total-Tokens"] = String(usage.total_tokens);
  }
  if (quantization !== undefined) headers["Densewire-Quantization"] = quantization;
  return { body, headers };
}
