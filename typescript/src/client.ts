/**
 * An embeddings client over `fetch` (SPEC.md sections 6 and 12): `POST {baseURL}/embeddings` with a
 * JSON request, asking for the binary formats first in `Accept` and decoding whatever the server
 * answers by its `Content-Type`. Against a densewire server it gets raw (or MessagePack, Protobuf,
 * Arrow) bodies; against any other OpenAI-compatible server, which answers JSON, it reads the
 * `encoding_format: "base64"` envelope it asked for. Works in browsers, Node 20+, Deno and Bun.
 */
import { decodeArrow } from "./arrow.js";
import { type DType, type Embeddings, allocData } from "./dtypes.js";
import { DensewireError, DensewireHTTPError, RateLimitError } from "./errors.js";
import { decodeJSON, fillRow } from "./json.js";
import { decodeMsgpack } from "./msgpack.js";
import { decodeProtobuf } from "./protobuf.js";
import { type Quantization, dequantize, parseQuantization } from "./quantization.js";
import { decodeRaw } from "./raw.js";
import { type RaggedTensor, type SparseTensor, decodeRaggedRaw, decodeSparseRaw, makeSparse } from "./ragged.js";
import { decodeRaggedArrow, decodeSparseArrow } from "./ragged-arrow.js";
import { decodeRaggedMsgpack, decodeSparseMsgpack } from "./ragged-msgpack.js";
import { decodeRaggedProtobuf, decodeSparseProtobuf } from "./ragged-protobuf.js";
import { type RetryOptions, fetchWithRetry, parseRetryAfter, retryPolicy } from "./retry.js";

/** The body formats of SPEC.md section 12. */
export type Format = "json" | "raw" | "msgpack" | "protobuf" | "arrow";

/** The media type of each format. */
export const MEDIA_TYPES: Readonly<Record<Format, string>> = Object.freeze({
  json: "application/json",
  raw: "application/octet-stream",
  msgpack: "application/vnd.msgpack",
  protobuf: "application/protobuf",
  arrow: "application/vnd.apache.arrow.stream",
});

const BY_MEDIA_TYPE: Readonly<Record<string, Format>> = Object.freeze({
  "application/json": "json",
  "application/octet-stream": "raw",
  "application/vnd.msgpack": "msgpack",
  "application/msgpack": "msgpack",
  "application/x-msgpack": "msgpack",
  "application/protobuf": "protobuf",
  "application/x-protobuf": "protobuf",
  "application/vnd.apache.arrow.stream": "arrow",
});

/** The format of a `Content-Type` value (parameters and case ignored, aliases included), or undefined. */
export function formatOfContentType(contentType: string | null | undefined): Format | undefined {
  if (!contentType) return undefined;
  const essence = contentType.split(";", 1)[0]!.trim().toLowerCase();
  return BY_MEDIA_TYPE[essence];
}

/**
 * The `Accept` header asking for `formats` in order of preference: q=1 for the first, 0.9, 0.8, ...
 * for the next binary ones, and q=0.5 for JSON, the fallback every OpenAI-compatible server has.
 */
export function acceptHeader(formats: readonly Format[] = DEFAULT_FORMATS): string {
  let q = 10;
  return formats
    .map((f) => {
      const type = MEDIA_TYPES[f];
      if (type === undefined) throw new TypeError(`unknown format ${String(f)}`);
      const weight = f === "json" ? 5 : Math.max(q--, 6);
      return weight === 10 ? type : `${type};q=0.${weight}`;
    })
    .join(", ");
}

/** Raw, then MessagePack, then Protobuf, then JSON. Arrow is asked for only when listed (it needs apache-arrow). */
export const DEFAULT_FORMATS: readonly Format[] = Object.freeze(["raw", "msgpack", "protobuf", "json"] as Format[]);

/**
 * Builds a {@link DensewireHTTPError} from a non-2xx response and its OpenAI-style error envelope (a
 * {@link RateLimitError} for a 429); `attempts` is how many times the request was sent.
 */
export async function httpError(response: Response, attempts = 0): Promise<DensewireHTTPError> {
  let text = "";
  try {
    text = await response.text();
  } catch {
    // the body could not be read: the status alone
  }
  let error: Record<string, unknown> | undefined;
  try {
    const doc = JSON.parse(text) as { error?: unknown };
    if (typeof doc === "object" && doc !== null && typeof doc.error === "object" && doc.error !== null) error = doc.error as Record<string, unknown>;
  } catch {
    // not JSON: keep the text
  }
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  const message = str(error?.["message"]) ?? (text.trim().slice(0, 500) || `HTTP ${response.status} ${response.statusText}`.trim());
  const offset = error?.["offset"];
  const details = {
    code: str(error?.["code"]),
    param: str(error?.["param"]),
    type: str(error?.["type"]),
    offset: typeof offset === "number" ? offset : undefined,
    body: text,
    attempts,
    retryAfterMs: parseRetryAfter(response.headers.get("retry-after")),
  };
  return response.status === 429 ? new RateLimitError(message, details) : new DensewireHTTPError(response.status, message, details);
}

/**
 * A 2xx response of a format this library reads: the format named by its `Content-Type` and its body,
 * read once with `arrayBuffer()`. A non-2xx response becomes a {@link DensewireHTTPError}, an unknown
 * `Content-Type` an `unsupported_media_type` error (the body is cancelled unread).
 */
async function readResponse(response: Response, attempts: number): Promise<{ format: Format; body: Uint8Array }> {
  if (!response.ok) throw await httpError(response, attempts);
  const contentType = response.headers.get("content-type");
  const format = formatOfContentType(contentType);
  if (format === undefined) {
    await response.body?.cancel().catch(() => undefined);
    throw new DensewireError("unsupported_media_type", `cannot decode a response of type ${JSON.stringify(contentType)}`, { field: "Content-Type" });
  }
  const body = new Uint8Array(await response.arrayBuffer());
  return { format, body };
}

/**
 * Decodes an embeddings response of any format by its `Content-Type`: the body is read once with
 * `arrayBuffer()`, and the tensor is a view over it where the format and alignment allow. A non-2xx
 * response becomes a {@link DensewireHTTPError}.
 */
export async function decodeResponse(response: Response, attempts = 0): Promise<Embeddings> {
  const { format, body } = await readResponse(response, attempts);
  switch (format) {
    case "json":
      return decodeJSON(body);
    case "raw":
      return decodeRaw(body, response.headers);
    case "msgpack":
      return decodeMsgpack(body);
    case "protobuf":
      return decodeProtobuf(body, { message: "EmbeddingsResponse" });
    case "arrow":
      return decodeArrow(body);
  }
}

/**
 * Decodes a per-token response of `POST /embed_all` by its `Content-Type`: densewire's ragged tensor
 * in any of its formats (SPEC.md 20), or TEI's JSON (`[[[f32]]]`, one matrix per input). A non-2xx
 * response becomes a {@link DensewireHTTPError}.
 */
export async function decodeTokensResponse(response: Response, attempts = 0): Promise<RaggedTensor> {
  const { format, body } = await readResponse(response, attempts);
  switch (format) {
    case "json":
      return teiTokens(body);
    case "raw":
      return decodeRaggedRaw(body, response.headers);
    case "msgpack":
      return decodeRaggedMsgpack(body);
    case "protobuf":
      return decodeRaggedProtobuf(body, { message: "RaggedEmbeddingsResponse" });
    case "arrow":
      return decodeRaggedArrow(body);
  }
}

/** TEI's JSON answer as an array of arrays (one per input) and their offsets; `what` says the shape on a mismatch. */
function teiArrays(body: Uint8Array, what: string): [unknown[][], Uint32Array] {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (e) {
    throw new DensewireError("malformed", `not valid JSON: ${(e as Error).message}`, {}, { cause: e });
  }
  if (!Array.isArray(doc) || !doc.every(Array.isArray)) throw new DensewireError("invalid_field", what, { field: "$" });
  const items = doc as unknown[][];
  const offsets = new Uint32Array(items.length + 1);
  items.forEach((m, i) => (offsets[i + 1] = offsets[i]! + m.length));
  return [items, offsets];
}

/** TEI's `/embed_all` JSON: an array of matrices (arrays of rows of numbers), into one float32 buffer. */
function teiTokens(body: Uint8Array): RaggedTensor {
  const [matrices, offsets] = teiArrays(body, "must be an array of matrices");
  const first = matrices.find((m) => m.length > 0)?.[0];
  const d = Array.isArray(first) ? first.length : 0;
  const data = new Float32Array(offsets[matrices.length]! * d);
  matrices.forEach((m, i) =>
    m.forEach((row, r) => {
      const field = `[${i}][${r}]`;
      if (!Array.isArray(row) || row.length !== d) throw new DensewireError("shape_mismatch", `must be a row of ${d} numbers`, { field });
      fillRow("float32", data, (offsets[i]! + r) * d, row, field);
    }),
  );
  return { kind: "ragged", dtype: "float32", shape: [matrices.length, d], offsets, data };
}

/**
 * Decodes a sparse response of `POST /embed_sparse` by its `Content-Type`: densewire's sparse tensor in
 * any of its formats (SPEC.md 20), or TEI's JSON (`[[{"index", "value"}]]`, one array per input), which
 * does not say the vocabulary size: `vocabSize`, else one past the largest index. A non-2xx response
 * becomes a {@link DensewireHTTPError}.
 */
export async function decodeSparseResponse(response: Response, attempts = 0, vocabSize?: number): Promise<SparseTensor> {
  const { format, body } = await readResponse(response, attempts);
  switch (format) {
    case "json":
      return teiSparse(body, vocabSize);
    case "raw":
      return decodeSparseRaw(body, response.headers);
    case "msgpack":
      return decodeSparseMsgpack(body);
    case "protobuf":
      return decodeSparseProtobuf(body, { message: "SparseEmbeddingsResponse" });
    case "arrow":
      return decodeSparseArrow(body);
  }
}

/** TEI's `/embed_sparse` JSON: per input an array of `{index, value}`, into one indices and one values array. */
function teiSparse(body: Uint8Array, vocabSize: number | undefined): SparseTensor {
  const [vectors, offsets] = teiArrays(body, "must be an array of arrays of {index, value}");
  const indices = new Uint32Array(offsets[vectors.length]!);
  const values = new Float32Array(indices.length);
  let at = 0;
  let top = -1;
  vectors.forEach((v, i) =>
    v.forEach((entry, j) => {
      const e = entry as { index?: unknown; value?: unknown } | null;
      const index = e?.index;
      if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= 2 ** 32) {
        throw new DensewireError("invalid_field", "must be an integer from 0 to 2^32 - 1", { field: `[${i}][${j}].index` });
      }
      if (typeof e?.value !== "number") throw new DensewireError("invalid_field", "must be a number", { field: `[${i}][${j}].value` });
      indices[at] = index as number;
      values[at++] = e.value;
      top = Math.max(top, index as number);
    }),
  );
  return makeSparse("float32", vocabSize ?? Math.max(top + 1, 1), offsets, indices, values);
}

/**
 * Options of {@link DensewireClient}. `maxRetries` (default 2), `backoffBaseMs` (500) and
 * `backoffMaxMs` (8000) say how a 429, a 503 or a failed connection is retried (see {@link RetryOptions}).
 */
export interface ClientOptions extends RetryOptions {
  /** The API root, as with OpenAI's SDK: requests go to `${baseURL}/embeddings`. Default `http://localhost:8000/v1`. */
  baseURL?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Response formats to ask for, best first (default raw, msgpack, protobuf, json). */
  formats?: readonly Format[];
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
}

/** Options of {@link DensewireClient.embed}. */
export interface EmbedOptions {
  /** Model id (the server's default when omitted). */
  model?: string;
  /** Truncate each vector to this many dimensions, then L2-normalise (server side). */
  dimensions?: number;
  /** Element type of the response (densewire servers); float32 when omitted. */
  dtype?: Exclude<DType, "float64">;
  /** `false`: an input over the model's token limit is an error instead of being cut (densewire servers). */
  truncate?: boolean;
  /** Cancels the request. */
  signal?: AbortSignal;
  /** Overrides the client's `formats` for this call. */
  formats?: readonly Format[];
  /** Overrides the client's `maxRetries` for this call. */
  maxRetries?: number;
  /**
   * With `dtype` `int8` or `uint8`: turn the codes back into float32 with the ranges the response's
   * quantization id names (`GET {baseURL}/quantization/{id}`, fetched once per id and cached). The
   * result is then float32, 4x the bytes in memory but 1/4 on the wire.
   */
  dequantize?: boolean;
}

/** Options of {@link DensewireClient.embedSparse}: those of embedTokens, TEI's request fields, and TEI JSON's vocabulary size. */
export interface SparseOptions extends Pick<EmbedOptions, "truncate" | "signal" | "formats" | "maxRetries"> {
  /** TEI's `truncation_direction`: which end a cut text loses (`"Right"` by default). */
  truncationDirection?: "Left" | "Right";
  /** TEI's `prompt_name`: a prompt of the model's configuration put before each text. */
  promptName?: string;
  /** densewire serve's `max_active_dims`: keep each vector's `k` largest weights only. */
  maxActiveDims?: number;
  /** The vocabulary size of a TEI JSON answer (which has none); one past the largest index when omitted. */
  vocabSize?: number;
}

/** Options of {@link DensewireClient.embedMany}. */
export interface EmbedManyOptions extends EmbedOptions {
  /** Texts per request (default 256; OpenAI allows at most 2048). */
  batchSize?: number;
  /** Requests in flight at once (default 4). */
  concurrency?: number;
}

/** A client for `POST /v1/embeddings` of densewire and OpenAI-compatible servers. */
export class DensewireClient {
  readonly baseURL: string;
  readonly formats: readonly Format[];
  readonly #apiKey: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #retry: Required<RetryOptions>;
  readonly #quantizations = new Map<string, Promise<Quantization>>();

  constructor(options: ClientOptions = {}) {
    this.baseURL = (options.baseURL ?? "http://localhost:8000/v1").replace(/\/+$/, "");
    this.formats = options.formats ?? DEFAULT_FORMATS;
    acceptHeader(this.formats); // validates
    this.#apiKey = options.apiKey;
    this.#headers = { ...options.headers };
    const f = options.fetch ?? (globalThis.fetch as typeof fetch | undefined);
    if (f === undefined) throw new Error("densewire: no fetch in this runtime; pass options.fetch");
    this.#fetch = f;
    this.#retry = retryPolicy(options);
  }

  /**
   * Embeds one text or a list of texts (at most 2048, none empty) in one request; the result has one
   * row per text, in input order. A 429, a 503 or a failed connection is retried (`maxRetries`); the
   * error after the last attempt is a {@link RateLimitError}, a {@link DensewireHTTPError} or a
   * {@link DensewireConnectionError} saying how many attempts were made.
   */
  async embed(input: string | readonly string[], options: EmbedOptions = {}): Promise<Embeddings> {
    const texts = typeof input === "string" ? [input] : [...input];
    if (texts.length === 0) throw new TypeError("embed: input must hold at least one text");
    const request: Record<string, unknown> = { input: texts };
    if (options.model !== undefined) request["model"] = options.model;
    request["encoding_format"] = "base64";
    if (options.dimensions !== undefined) request["dimensions"] = options.dimensions;
    // only densewire servers know dtype/truncate: leave them out at their defaults so that any
    // OpenAI-compatible server accepts the request
    if (options.dtype !== undefined && options.dtype !== "float32") request["dtype"] = options.dtype;
    if (options.dequantize === true && options.dtype !== "int8" && options.dtype !== "uint8") {
      throw new TypeError(`embed: dequantize needs dtype "int8" or "uint8", got ${JSON.stringify(options.dtype ?? "float32")}`);
    }
    if (options.truncate === false) request["truncate"] = false;
    const init: RequestInit = {
      method: "POST",
      headers: this.#requestHeaders({ "Content-Type": "application/json", Accept: acceptHeader(options.formats ?? this.formats) }),
      body: JSON.stringify(request),
    };
    if (options.signal !== undefined) init.signal = options.signal;
    const policy = this.#policy(options.maxRetries);
    const { response, attempts } = await fetchWithRetry(this.#fetch, `${this.baseURL}/embeddings`, init, policy);
    const result = await decodeResponse(response, attempts);
    if (result.shape[0] !== texts.length) {
      throw new DensewireError("shape_mismatch", `the server returned ${result.shape[0]} rows for ${texts.length} inputs`, { field: "data" });
    }
    if (options.dequantize !== true) return result;
    if (result.dtype !== "int8" && result.dtype !== "uint8") {
      throw new DensewireError("invalid_field", `asked for ${options.dtype} rows to dequantize, the server answered ${result.dtype}`, { field: "dtype" });
    }
    if (result.quantization === undefined) {
      throw new DensewireError("invalid_field", `the server sent ${result.dtype} rows without a quantization id: their ranges are unknown`, {
        field: "quantization",
      });
    }
    const q = await this.quantization(result.quantization, options);
    if (q.dimensions !== result.shape[1]) {
      throw new DensewireError("shape_mismatch", `quantization ${q.id} has ${q.dimensions} dimensions, the rows ${result.shape[1]}`, { field: "quantization" });
    }
    return dequantize(result, q);
  }

  /** POSTs `request` as JSON to `path` on the server's root (TEI's routes, beside `/v1`), retried. */
  async #postRoot(path: string, request: Record<string, unknown>,
    options: Pick<EmbedOptions, "signal" | "formats" | "maxRetries">): Promise<{ response: Response; attempts: number }> {
    const init: RequestInit = {
      method: "POST",
      headers: this.#requestHeaders({ "Content-Type": "application/json", Accept: acceptHeader(options.formats ?? this.formats) }),
      body: JSON.stringify(request),
    };
    if (options.signal !== undefined) init.signal = options.signal;
    const root = this.baseURL.replace(/\/v1$/, "");
    return fetchWithRetry(this.#fetch, `${root}${path}`, init, this.#policy(options.maxRetries));
  }

  /**
   * Per-token embeddings (TEI's `POST /embed_all` on the server's root, beside `/v1`): one
   * `m_i x d` matrix per text, special tokens included, as a {@link RaggedTensor} over one buffer
   * (`raggedMatrix(t, i)` is text `i`'s, a view). Asked for in the client's formats (densewire's
   * ragged raw body first by default); TEI's JSON shape is read too. `truncate` cuts texts longer
   * than the model's maximum (the server's `--auto-truncate` when omitted). Retried as {@link embed}.
   */
  async embedTokens(input: string | readonly string[], options: Pick<EmbedOptions, "truncate" | "signal" | "formats" | "maxRetries"> = {}): Promise<RaggedTensor> {
    const texts = typeof input === "string" ? [input] : [...input];
    if (texts.length === 0) throw new TypeError("embedTokens: input must hold at least one text");
    const request: Record<string, unknown> = { inputs: texts };
    if (options.truncate !== undefined) request["truncate"] = options.truncate;
    const { response, attempts } = await this.#postRoot("/embed_all", request, options);
    const result = await decodeTokensResponse(response, attempts);
    if (result.shape[0] !== texts.length) {
      throw new DensewireError("shape_mismatch", `the server returned ${result.shape[0]} matrices for ${texts.length} inputs`, { field: "data" });
    }
    return result;
  }

  /**
   * Sparse (SPLADE) vectors (TEI's `POST /embed_sparse` on the server's root, beside `/v1`): per text
   * its non-zero vocabulary weights, as a {@link SparseTensor} whose indices and values are one array
   * each (`sparseVector(t, i)` is text `i`'s, views). Asked for in the client's formats (densewire's
   * sparse raw body first by default); TEI's JSON is read too, with `vocabSize` as its vocabulary size
   * (TEI sends none; one past the largest index when omitted). `truncate` cuts texts longer than the
   * model's maximum (the server's `--auto-truncate` when omitted); `truncationDirection` and
   * `promptName` are TEI's, `maxActiveDims` densewire serve's top-k pruning. Retried as {@link embed}.
   */
  async embedSparse(input: string | readonly string[], options: SparseOptions = {}): Promise<SparseTensor> {
    const texts = typeof input === "string" ? [input] : [...input];
    if (texts.length === 0) throw new TypeError("embedSparse: input must hold at least one text");
    const request: Record<string, unknown> = { inputs: texts };
    if (options.truncate !== undefined) request["truncate"] = options.truncate;
    if (options.truncationDirection !== undefined) request["truncation_direction"] = options.truncationDirection;
    if (options.promptName !== undefined) request["prompt_name"] = options.promptName;
    if (options.maxActiveDims !== undefined) request["max_active_dims"] = options.maxActiveDims;
    const { response, attempts } = await this.#postRoot("/embed_sparse", request, options);
    const result = await decodeSparseResponse(response, attempts, options.vocabSize);
    if (result.shape[0] !== texts.length) {
      throw new DensewireError("shape_mismatch", `the server returned ${result.shape[0]} vectors for ${texts.length} inputs`, { field: "data" });
    }
    return result;
  }

  /**
   * The quantization ranges a server publishes at `GET {baseURL}/quantization/{id}`, checked against
   * their id ({@link parseQuantization}). Fetched once per id: the object is immutable, so it is
   * cached for the client's lifetime (a failed fetch is not cached).
   */
  quantization(id: string, options: { signal?: AbortSignal; maxRetries?: number } = {}): Promise<Quantization> {
    let entry = this.#quantizations.get(id);
    if (entry === undefined) {
      entry = this.#fetchQuantization(id, options);
      this.#quantizations.set(id, entry);
      entry.catch(() => this.#quantizations.delete(id));
    }
    return entry;
  }

  async #fetchQuantization(id: string, options: { signal?: AbortSignal; maxRetries?: number }): Promise<Quantization> {
    const init: RequestInit = { method: "GET", headers: this.#requestHeaders({ Accept: "application/json" }) };
    if (options.signal !== undefined) init.signal = options.signal;
    const url = `${this.baseURL}/quantization/${encodeURIComponent(id)}`;
    const { response, attempts } = await fetchWithRetry(this.#fetch, url, init, this.#policy(options.maxRetries));
    if (!response.ok) throw await httpError(response, attempts);
    const q = parseQuantization(await response.text());
    if (q.id !== id) throw new DensewireError("invalid_field", `asked for quantization ${id}, the server answered ${q.id}`, { field: "quantization.id" });
    return q;
  }

  #requestHeaders(base: Record<string, string>): Record<string, string> {
    const headers: Record<string, string> = { ...base, ...this.#headers };
    if (this.#apiKey !== undefined) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    return headers;
  }

  #policy(maxRetries: number | undefined): Required<RetryOptions> {
    return maxRetries === undefined ? this.#retry : retryPolicy({ ...this.#retry, maxRetries });
  }

  /**
   * Embeds any number of texts in batches of `batchSize`, at most `concurrency` requests at once, and
   * returns one tensor with a row per text in input order. The first failure aborts the other requests
   * and is thrown.
   */
  async embedMany(texts: readonly string[], options: EmbedManyOptions = {}): Promise<Embeddings> {
    const batchSize = options.batchSize ?? 256;
    const concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    const dtype = options.dequantize === true ? "float32" : (options.dtype ?? "float32");
    if (texts.length === 0) return { dtype, shape: [0, options.dimensions ?? 0], data: allocData(dtype, 0) } as Embeddings;

    const batches: string[][] = [];
    for (let i = 0; i < texts.length; i += batchSize) batches.push(texts.slice(i, i + batchSize));
    const results = new Array<Embeddings>(batches.length);
    const controller = new AbortController();
    const outer = options.signal;
    const onAbort = () => controller.abort(outer!.reason);
    if (outer !== undefined) {
      if (outer.aborted) controller.abort(outer.reason);
      else outer.addEventListener("abort", onAbort, { once: true });
    }
    let next = 0;
    const worker = async () => {
      while (next < batches.length && !controller.signal.aborted) {
        const i = next++;
        results[i] = await this.embed(batches[i]!, { ...options, signal: controller.signal });
      }
    };
    try {
      const workers = Array.from({ length: Math.min(concurrency, batches.length) }, () =>
        worker().catch((e: unknown) => {
          controller.abort(e);
          throw e;
        }),
      );
      const settled = await Promise.allSettled(workers);
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
      if (failed !== undefined) throw controller.signal.reason ?? failed.reason;
      if (controller.signal.aborted) throw controller.signal.reason;
    } finally {
      outer?.removeEventListener("abort", onAbort);
    }
    return concatRows(results);
  }
}

/**
 * Concatenates tensors of one dtype and width row-wise (bit-exact copies); sums usage. Quantized rows
 * join only rows of the same quantization id.
 */
export function concatRows(parts: readonly Embeddings[]): Embeddings {
  const first = parts[0];
  if (first === undefined) throw new RangeError("concatRows: nothing to concatenate");
  const { dtype } = first;
  const d = first.shape[1];
  let n = 0;
  let items = 0;
  for (const p of parts) {
    if (p.dtype !== dtype || p.shape[1] !== d) {
      throw new DensewireError("shape_mismatch", `cannot join (${p.shape}) ${p.dtype} rows to (${first.shape}) ${dtype} rows`, { field: "data" });
    }
    n += p.shape[0];
    items += p.data.length;
  }
  const out = allocData(dtype, items);
  let at = 0;
  for (const p of parts) {
    (out as Uint8Array).set(p.data as Uint8Array, at); // same typed array type: a bit-exact copy
    at += p.data.length;
  }
  const result = { dtype, shape: [n, d], data: out } as Embeddings;
  if (first.model !== undefined) result.model = first.model;
  if (first.quantization !== undefined) {
    const other = parts.find((p) => p.quantization !== first.quantization);
    if (other !== undefined) {
      throw new DensewireError("shape_mismatch", `cannot join rows quantized with ranges ${first.quantization} and ${other.quantization ?? "(none)"}`, {
        field: "quantization",
      });
    }
    result.quantization = first.quantization;
  }
  if (parts.every((p) => p.usage !== undefined)) {
    result.usage = {
      prompt_tokens: parts.reduce((s, p) => s + p.usage!.prompt_tokens, 0),
      total_tokens: parts.reduce((s, p) => s + p.usage!.total_tokens, 0),
    };
  }
  return result;
}
