/**
 * The Open Inference Protocol (KServe v2) and its binary tensor data extension (SPEC.md section 19,
 * "Open Inference Protocol"): a response is a JSON object alone, or a JSON header of
 * `Inference-Header-Content-Length` bytes followed by the blobs of the outputs that have
 * `parameters.binary_data_size`, in output order.
 *
 * {@link decodeKServe} reads one into densewire tensors: a binary output is a typed-array **view over
 * the body** when its blob is aligned for the dtype (always for INT8 and UINT8; one copy otherwise, as
 * for MessagePack), a `BYTES` output the list of its elements as views (`Uint8Array` subarrays), a
 * JSON output one typed array filled from the numbers (section 3.5 rounding).
 */
import { type DType, type Embeddings, type Tensor, allocData, describe, makeTensor, rowBytes, viewAs } from "./dtypes.js";
import { DensewireError } from "./errors.js";
import { fillRow } from "./json.js";
import { type HeadersInput, getHeader } from "./raw.js";

/** The HTTP header giving the JSON header's byte length. */
export const INFERENCE_HEADER_CONTENT_LENGTH = "Inference-Header-Content-Length";

/** A KServe datatype a densewire reader knows (SPEC.md 19.1): the tensor ones and `BYTES` (text). */
export type KServeDatatype = "FP32" | "FP16" | "BF16" | "FP64" | "INT8" | "UINT8" | "BYTES";

/** KServe datatype -> densewire dtype; `BYTES` is text, not a tensor dtype. */
export const KSERVE_DATATYPES: Readonly<Record<Exclude<KServeDatatype, "BYTES">, DType>> = Object.freeze({
  FP32: "float32",
  FP16: "float16",
  BF16: "bfloat16",
  FP64: "float64",
  INT8: "int8",
  UINT8: "uint8",
});

/** KServe datatypes with no densewire dtype (`unknown_dtype` when read). */
const OTHER_DATATYPES = new Set(["BOOL", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UINT64"]);

/** One output of an inference response. */
export interface KServeOutput {
  name: string;
  datatype: KServeDatatype;
  /** As sent: `[n, d]` or `[d]` for a tensor (the tensor is then `(1, d)`), any rank for `BYTES`. */
  shape: number[];
  parameters: Record<string, unknown>;
  /** Whether it came as a blob (`parameters.binary_data_size`) rather than JSON `data`. */
  binary: boolean;
  /** The tensor, for every datatype but `BYTES`. */
  tensor?: Tensor;
  /** The elements of a `BYTES` output (views over the body when binary). */
  elements?: Uint8Array[];
  /** `parameters.quantization`: the id of an INT8/UINT8 embeddings output's ranges (section 17.4). */
  quantization?: string;
}

/** An inference response: its outputs by name in order, and its model name, version and id as sent. */
export interface KServeResponse {
  outputs: Map<string, KServeOutput>;
  modelName?: string;
  modelVersion?: string;
  id?: string;
  parameters: Record<string, unknown>;
}

const utf8 = /*@__PURE__*/ new TextDecoder("utf-8", { fatal: true });
const utf8Encoder = /*@__PURE__*/ new TextEncoder();

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const invalid = (field: string, why: string, offset?: number) => new DensewireError("invalid_field", why, { field, offset });

/** A datatype name checked (SPEC.md 19.1): `unknown_dtype` on `field` for any other string. */
export function parseKServeDatatype(value: unknown, field = "datatype"): KServeDatatype {
  if (typeof value !== "string") throw invalid(field, `must be a string, got ${describe(value)}`);
  if (value === "BYTES" || value in KSERVE_DATATYPES) return value as KServeDatatype;
  const known = `${Object.keys(KSERVE_DATATYPES).join(", ")} or BYTES`;
  if (OTHER_DATATYPES.has(value)) throw new DensewireError("unknown_dtype", `${value} has no densewire dtype; expected one of ${known}`, { field });
  throw new DensewireError("unknown_dtype", `unknown datatype ${describe(value)}; expected one of ${known}`, { field });
}

/** `Inference-Header-Content-Length` checked against the body (SPEC.md 19.3 step 1); undefined when absent. */
function headerLength(headers: HeadersInput, bodyLength: number): number | undefined {
  const value = getHeader(headers, INFERENCE_HEADER_CONTENT_LENGTH);
  if (value === undefined) return undefined;
  const text = value.trim();
  if (!/^[0-9]+$/.test(text)) throw invalid(INFERENCE_HEADER_CONTENT_LENGTH, `must be a decimal byte count, got ${describe(value)}`);
  const h = Number(text);
  if (h > bodyLength) {
    throw new DensewireError("truncated", `the JSON header is ${text} bytes but the body has only ${bodyLength}`, { offset: bodyLength, field: INFERENCE_HEADER_CONTENT_LENGTH });
  }
  if (h === 0) throw new DensewireError("malformed", "a response has a JSON header; Inference-Header-Content-Length is 0", { offset: 0, field: INFERENCE_HEADER_CONTENT_LENGTH });
  return h;
}

/** The largest shape entry a reader takes (SPEC.md 19.2): 2^31 - 1. */
const MAX_SHAPE_ENTRY = 2 ** 31 - 1;

function shapeOf(value: unknown, field: string, tensor: boolean): number[] {
  const max = tensor ? MAX_SHAPE_ENTRY : Number.MAX_SAFE_INTEGER; // a BYTES shape only counts elements
  const ok = Array.isArray(value) && value.every((s) => Number.isSafeInteger(s) && (s as number) >= 0 && (s as number) <= max);
  if (!ok || (tensor && value.length !== 1 && value.length !== 2)) {
    throw invalid(field, `must be an array of ${tensor ? "one or two " : ""}non-negative integers up to 2^31 - 1, got ${describe(value)}`);
  }
  return value as number[];
}

/** A JSON `data` array, flat or nested, in row-major order. */
function flatten(data: unknown, field: string): unknown[] {
  if (!Array.isArray(data)) throw invalid(field, `must be an array, got ${describe(data)}`);
  if (!data.some(Array.isArray)) return data;
  const flat: unknown[] = [];
  const stack: [unknown[], number][] = [[data, 0]];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top[1] === top[0].length) {
      stack.pop();
      continue;
    }
    const v = top[0][top[1]++];
    if (Array.isArray(v)) stack.push([v, 0]);
    else flat.push(v);
  }
  return flat;
}

/** The elements of a `BYTES` blob (4-byte little-endian length, then the bytes), as views; `start` its body offset. */
function bytesElements(blob: Uint8Array, start: number, field: string): Uint8Array[] {
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const out: Uint8Array[] = [];
  for (let pos = 0; pos < blob.length; ) {
    const left = blob.length - pos;
    if (left < 4) throw new DensewireError("malformed", `a BYTES element length needs 4 bytes, ${left} left in the tensor`, { offset: start + pos, field });
    const n = dv.getUint32(pos, true);
    if (n > left - 4) {
      throw new DensewireError("malformed", `a BYTES element of ${n} bytes runs past the end of its tensor (${left - 4} bytes left)`, { offset: start + pos, field });
    }
    out.push(blob.subarray(pos + 4, pos + 4 + n));
    pos += 4 + n;
  }
  return out;
}

const product = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const nd = (shape: readonly number[]): [number, number] => (shape.length === 1 ? [1, shape[0]!] : [shape[0]!, shape[1]!]);

interface Spec {
  field: string;
  name: string;
  datatype: KServeDatatype;
  shape: number[];
  parameters: Record<string, unknown>;
  size: number | undefined;
  doc: Record<string, unknown>;
}

/** Step 3 of SPEC.md 19.3: every output's name, datatype, parameters, shape and quantization. */
function outputSpecs(outputs: unknown): Spec[] {
  if (!Array.isArray(outputs)) throw invalid("outputs", `must be an array of outputs, got ${describe(outputs)}`);
  return outputs.map((o, i) => {
    const field = `outputs[${i}]`;
    if (!isObject(o)) throw invalid(field, `must be an object, got ${describe(o)}`);
    if (typeof o["name"] !== "string") throw invalid(`${field}.name`, `must be a string, got ${describe(o["name"])}`);
    if (typeof o["datatype"] !== "string") throw invalid(`${field}.datatype`, `must be a string, got ${describe(o["datatype"])}`);
    const parameters = o["parameters"] ?? {};
    if (!isObject(parameters)) throw invalid(`${field}.parameters`, `must be an object, got ${describe(parameters)}`);
    const size = parameters["binary_data_size"];
    if (size != null && !(Number.isSafeInteger(size) && (size as number) >= 0)) {
      throw invalid(`${field}.parameters.binary_data_size`, `must be a non-negative integer, got ${describe(size)}`);
    }
    const datatype = parseKServeDatatype(o["datatype"], `${field}.datatype`);
    const shape = shapeOf(o["shape"], `${field}.shape`, datatype !== "BYTES");
    const q = parameters["quantization"];
    if (q != null && typeof q !== "string") throw invalid(`${field}.parameters.quantization`, `must be a string, got ${describe(q)}`);
    return { field, name: o["name"], datatype, shape, parameters, size: size == null ? undefined : (size as number), doc: o };
  });
}

function jsonOutput(spec: Spec): Pick<KServeOutput, "tensor" | "elements"> {
  const field = `${spec.field}.data`;
  const values = flatten(spec.doc["data"], field);
  const count = product(spec.shape);
  if (values.length !== count) throw new DensewireError("shape_mismatch", `${values.length} elements, the shape ${describe(spec.shape)} holds ${count}`, { field });
  if (spec.datatype === "BYTES") {
    return {
      elements: values.map((v, j) => {
        if (typeof v !== "string") throw invalid(`${field}[${j}]`, `must be a string, got ${describe(v)}`);
        return utf8Encoder.encode(v);
      }),
    };
  }
  const dtype = KSERVE_DATATYPES[spec.datatype];
  const data = allocData(dtype, count);
  fillRow(dtype, data, 0, values, field); // one flat "row": element j's error names data[j]
  return { tensor: makeTensor(dtype, nd(spec.shape), data) };
}

/**
 * Reads a KServe v2 inference response (SPEC.md 19.3) given its HTTP headers (a `fetch` Headers, a
 * plain object or a Map). Binary outputs alias `body` where the dtype's alignment allows: keep the
 * body unchanged while they are in use.
 *
 * Errors, the first in the spec's order: `invalid_field`, `truncated` or `malformed` on
 * `Inference-Header-Content-Length`; `malformed` when the header is not a UTF-8 JSON object;
 * `invalid_field` on `outputs`, `outputs[i].name`, `.datatype`, `.parameters`,
 * `.parameters.binary_data_size`, `.shape`, `.parameters.quantization`, `.data`, `.data[j]`;
 * `unknown_dtype` on `outputs[i].datatype`; `truncated` and `length_mismatch` (body offsets) on
 * `outputs[i].parameters.binary_data_size`; `malformed` for a `BYTES` element past its blob and for
 * bytes after the last blob; `shape_mismatch` for an element count other than the shape's.
 */
export function decodeKServe(body: Uint8Array | ArrayBuffer, headers: HeadersInput = {}): KServeResponse {
  const bytes = body instanceof Uint8Array ? body : new Uint8Array(body);
  const h = headerLength(headers, bytes.length) ?? bytes.length;
  let doc: unknown;
  try {
    doc = JSON.parse(utf8.decode(bytes.subarray(0, h)));
  } catch (e) {
    throw new DensewireError("malformed", `the inference header is not UTF-8 JSON: ${(e as Error).message}`, {}, { cause: e });
  }
  if (!isObject(doc)) throw new DensewireError("malformed", `the inference header must be a JSON object, got ${describe(doc)}`, { offset: 0 });
  const specs = outputSpecs(doc["outputs"]);

  const outputs = new Map<string, KServeOutput>();
  let pos = h;
  for (const spec of specs) {
    const hasData = "data" in spec.doc;
    if (spec.size !== undefined && hasData) throw invalid(`${spec.field}.data`, "has both data and parameters.binary_data_size");
    if (spec.size === undefined && !hasData) throw invalid(`${spec.field}.data`, "has neither data nor parameters.binary_data_size");
    let parts: Pick<KServeOutput, "tensor" | "elements">;
    if (spec.size !== undefined) {
      const sizeField = `${spec.field}.parameters.binary_data_size`;
      if (spec.size > bytes.length - pos) {
        throw new DensewireError("truncated", `a blob of ${spec.size} bytes at offset ${pos} runs past the end of the ${bytes.length}-byte body`, { offset: bytes.length, field: sizeField });
      }
      const blob = bytes.subarray(pos, pos + spec.size);
      if (spec.datatype === "BYTES") {
        const elements = bytesElements(blob, pos, spec.field);
        const count = product(spec.shape);
        if (elements.length !== count) throw new DensewireError("shape_mismatch", `${elements.length} BYTES elements, the shape ${describe(spec.shape)} holds ${count}`, { field: spec.field });
        parts = { elements };
      } else {
        const dtype = KSERVE_DATATYPES[spec.datatype];
        const [n, d] = nd(spec.shape);
        const expected = n * rowBytes(dtype, d);
        if (spec.size !== expected) {
          throw new DensewireError("length_mismatch", `a blob of ${spec.size} bytes where the shape ${describe(spec.shape)} of ${spec.datatype} needs ${expected}`, { offset: pos + Math.min(spec.size, expected), field: sizeField });
        }
        parts = { tensor: makeTensor(dtype, [n, d], viewAs(blob, dtype, "little")) };
      }
      pos += spec.size;
    } else {
      parts = jsonOutput(spec);
    }
    const out: KServeOutput = { name: spec.name, datatype: spec.datatype, shape: spec.shape, parameters: spec.parameters, binary: spec.size !== undefined, ...parts };
    if (typeof spec.parameters["quantization"] === "string") out.quantization = spec.parameters["quantization"];
    outputs.set(spec.name, out);
  }
  if (pos !== bytes.length) throw new DensewireError("malformed", `${bytes.length - pos} bytes after the last tensor`, { offset: pos });
  const result: KServeResponse = { outputs, parameters: isObject(doc["parameters"]) ? doc["parameters"] : {} };
  for (const [key, as] of [["model_name", "modelName"], ["model_version", "modelVersion"], ["id", "id"]] as const) {
    if (typeof doc[key] === "string") result[as] = doc[key];
  }
  return result;
}

/**
 * The output `name` of a response as densewire `Embeddings`: its tensor, the response's model name
 * as `model`, and an INT8/UINT8 output's quantization id (`invalid_field` on `outputs` when there is
 * no tensor output of that name).
 */
export function kserveEmbeddings(response: KServeResponse, name = "embedding"): Embeddings {
  const out = response.outputs.get(name);
  if (out?.tensor === undefined) {
    throw invalid("outputs", `no tensor output ${describe(name)}; the response has ${[...response.outputs.keys()].join(", ") || "none"}`);
  }
  const result = { ...out.tensor } as Embeddings;
  if (response.modelName !== undefined) result.model = response.modelName;
  if (out.quantization !== undefined) result.quantization = out.quantization;
  return result;
}
