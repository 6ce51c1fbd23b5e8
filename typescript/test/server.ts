/**
 * A small in-process embeddings server on node:http for the client tests, answering like SPEC.md
 * sections 6, 11 and 12 say: POST /v1/embeddings with a JSON request, the response format negotiated
 * from Accept (q-values, aliases, `format` query parameter, 406 when nothing fits), errors as OpenAI
 * envelopes with `offset`. Embeddings are deterministic functions of the text.
 *
 * `mode: "openai"` behaves like OpenAI's API instead: JSON whatever Accept says, no densewire fields,
 * and unknown request fields (such as `dtype`) rejected.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import {
  type Format,
  DensewireError,
  MEDIA_TYPES,
  encodeArrow,
  encodeJSON,
  encodeMsgpack,
  encodeProtobuf,
  encodeRaw,
  formatOfContentType,
  fromFloat32,
  isDType,
  quantizationId,
  quantize,
} from "../src/index.js";

export interface FakeServerOptions {
  mode?: "densewire" | "openai";
  /** Model dimensions (default 384). */
  dimensions?: number;
  /** Milliseconds to wait before answering (to observe concurrency and aborts). */
  delayMs?: number;
  /** Compress responses with gzip when Accept-Encoding allows (SPEC.md section 12). */
  gzip?: boolean;
  /** Answer with this status and body instead (an error of another server, say). */
  override?: { status: number; body: string; contentType?: string };
}

export interface FakeServer {
  url: string;
  requests: { headers: IncomingMessage["headers"]; body: Record<string, unknown>; url: string }[];
  /** The GET /v1/quantization/{id} requests answered. */
  quantizationRequests: string[];
  maxInFlight: number;
  close(): Promise<void>;
}

const FORMATS: Format[] = ["json", "raw", "msgpack", "protobuf", "arrow"]; // server order (JSON first)

/** RFC 9110 section 12.5.1 negotiation among the five media types (SPEC.md section 12). */
export function negotiate(accept: string | undefined): Format | undefined {
  if (accept === undefined || accept.trim() === "") return "json";
  const ranges = accept.split(",").map((part) => {
    const [type, ...params] = part.trim().split(";").map((x) => x.trim());
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split("=");
      if (k?.trim().toLowerCase() === "q") q = Number(v);
    }
    return { type: type!.toLowerCase(), q };
  });
  let best: Format | undefined;
  let bestQ = 0;
  for (const f of FORMATS) {
    const full = MEDIA_TYPES[f];
    const aliases = Object.keys({ ...ALIASES }).filter((a) => ALIASES[a] === f);
    let q = -1;
    let specificity = -1;
    for (const r of ranges) {
      const s = r.type === "*/*" ? 0 : r.type === "application/*" ? 1 : r.type === full || aliases.includes(r.type) ? 2 : -1;
      if (s > specificity) {
        specificity = s;
        q = r.q;
      }
    }
    if (q > bestQ) {
      bestQ = q;
      best = f;
    }
  }
  return best;
}

const ALIASES: Record<string, Format> = {
  "application/msgpack": "msgpack",
  "application/x-msgpack": "msgpack",
  "application/x-protobuf": "protobuf",
};

interface Ranges {
  id: string;
  lower: Float32Array;
  upper: Float32Array;
}

/** The fake server's calibration texts: the ranges cover them, and clamp what falls outside. */
export const CALIBRATION = Array.from({ length: 64 }, (_, i) => `calibration text number ${i}`);

/** The object of GET /v1/quantization/{id}. */
export function quantizationObject(q: Ranges): Record<string, unknown> {
  const b64 = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("base64");
  return {
    object: "quantization",
    id: q.id,
    model: "fake-model",
    method: "minmax-per-dimension",
    calibration: { name: "fake", texts: CALIBRATION.length, sha256: "0".repeat(64) },
    dimensions: q.lower.length,
    lower: b64(q.lower),
    upper: b64(q.upper),
  };
}

/** A deterministic unit-length float32 embedding of a text. */
export function fakeEmbedding(text: string, d: number): Float32Array {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  const out = new Float32Array(d);
  let norm = 0;
  for (let j = 0; j < d; j++) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) >>> 0;
    const v = (h / 2 ** 32) * 2 - 1;
    out[j] = v;
    norm += v * v;
  }
  for (let j = 0; j < d; j++) out[j] = out[j]! / Math.sqrt(norm);
  return out;
}

function sendError(res: ServerResponse, e: DensewireError): void {
  res.writeHead(e.status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(e.toJSON()));
}

const KNOWN = new Set(["input", "model", "encoding_format", "dimensions", "user", "dtype", "byteorder", "truncate"]);
const OPENAI_KNOWN = new Set(["input", "model", "encoding_format", "dimensions", "user"]);

export async function startFakeServer(options: FakeServerOptions = {}): Promise<FakeServer> {
  const mode = options.mode ?? "densewire";
  const modelDims = options.dimensions ?? 384;
  // int8/uint8: ranges per requested d, min and max over a fixed calibration set (as densewire serve does)
  const quantizations = new Map<number, Ranges>();
  const rangesFor = (d: number): Ranges => {
    let q = quantizations.get(d);
    if (q === undefined) {
      const lower = new Float32Array(d).fill(Infinity);
      const upper = new Float32Array(d).fill(-Infinity);
      for (const text of CALIBRATION) {
        const v = fakeEmbedding(text, modelDims);
        for (let j = 0; j < d; j++) {
          lower[j] = Math.min(lower[j]!, v[j]!);
          upper[j] = Math.max(upper[j]!, v[j]!);
        }
      }
      q = { id: quantizationId(lower, upper), lower, upper };
      quantizations.set(d, q);
    }
    return q;
  };
  let inFlight = 0;
  const state: FakeServer = { url: "", requests: [], quantizationRequests: [], maxInFlight: 0, close: async () => undefined };

  const handle = async (req: IncomingMessage, res: ServerResponse, raw: string) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET" && url.pathname.startsWith("/v1/quantization/") && mode === "densewire") {
      const id = decodeURIComponent(url.pathname.slice("/v1/quantization/".length));
      state.quantizationRequests.push(id);
      const q = [...quantizations.values()].find((r) => r.id === id);
      if (q === undefined) return sendError(res, new DensewireError("not_found", `no quantization ${id}`));
      res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "public, max-age=31536000, immutable" });
      return res.end(JSON.stringify(quantizationObject(q)));
    }
    if (req.method !== "POST" || url.pathname !== "/v1/embeddings") {
      return sendError(res, new DensewireError("not_found", `no route ${req.method} ${url.pathname}`));
    }
    if (options.override) {
      res.writeHead(options.override.status, { "Content-Type": options.override.contentType ?? "application/json" });
      return res.end(options.override.body);
    }
    if (formatOfContentType(req.headers["content-type"]) !== "json") {
      return sendError(res, new DensewireError("unsupported_media_type", "the request must be application/json"));
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return sendError(res, new DensewireError("malformed", "the request is not JSON"));
    }
    state.requests.push({ headers: req.headers, body, url: req.url ?? "" });
    for (const k of Object.keys(body)) {
      if (!(mode === "openai" ? OPENAI_KNOWN : KNOWN).has(k)) {
        if (mode === "openai") {
          res.writeHead(400, { "Content-Type": "application/json" });
          return res.end(JSON.stringify({ error: { message: `Unrecognized request argument supplied: ${k}`, type: "invalid_request_error", param: null, code: null } }));
        }
        return sendError(res, new DensewireError("invalid_field", "unknown request field", { field: k }));
      }
    }
    if (mode === "densewire" && req.headers.authorization !== undefined && req.headers.authorization !== "Bearer secret") {
      return sendError(res, new DensewireError("unauthorized", "wrong API key"));
    }
    const input = typeof body["input"] === "string" ? [body["input"]] : body["input"];
    if (!Array.isArray(input) || input.length === 0 || input.length > 2048 || input.some((x) => typeof x !== "string" || x === "")) {
      return sendError(res, new DensewireError("invalid_field", "input must be 1 to 2048 non-empty strings", { field: "input" }));
    }
    const dtype = body["dtype"] ?? "float32";
    if (!isDType(dtype) || dtype === "float64") return sendError(res, new DensewireError("unknown_dtype", `unknown dtype ${String(dtype)}`, { field: "dtype" }));
    const d = (body["dimensions"] as number | undefined) ?? modelDims;
    const model = (body["model"] as string | undefined) ?? "fake-model";
    const values = new Float32Array(input.length * d);
    input.forEach((text: string, i) => values.set(fakeEmbedding(text, modelDims).subarray(0, d), i * d));
    let quantization: string | undefined;
    let tensor;
    if (dtype === "int8" || dtype === "uint8") {
      const q = rangesFor(d);
      tensor = quantize({ dtype: "float32", shape: [input.length, d], data: values }, q, dtype);
      quantization = q.id;
    } else {
      tensor = fromFloat32(values, [input.length, d], dtype);
    }
    const tokens = input.reduce((s: number, t: string) => s + t.split(/\s+/).length, 0);
    const meta = { model, usage: { prompt_tokens: tokens, total_tokens: tokens }, ...(quantization === undefined ? {} : { quantization }) };

    const format = mode === "openai" ? "json" : ((url.searchParams.get("format") as Format | null) ?? negotiate(req.headers.accept));
    if (format === undefined) {
      return sendError(res, new DensewireError("not_acceptable", `supported: ${FORMATS.map((f) => MEDIA_TYPES[f]).join(", ")}`));
    }
    if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
    const headers: Record<string, string> = { "Content-Type": MEDIA_TYPES[format], Vary: "Accept, Accept-Encoding" };
    let out: Uint8Array | string;
    switch (format) {
      case "json": {
        const encodingFormat = body["encoding_format"] === "base64" ? "base64" : "float";
        if (mode === "openai") {
          // OpenAI's shape: no dtype/byteorder/dimensions, rows in index order (here: reversed positions)
          const doc = JSON.parse(encodeJSON(tensor, { encodingFormat, ...meta })) as Record<string, unknown>;
          delete doc["dtype"];
          delete doc["byteorder"];
          delete doc["dimensions"];
          (doc["data"] as unknown[]).reverse();
          out = JSON.stringify(doc);
        } else {
          out = encodeJSON(tensor, { encodingFormat, ...meta });
        }
        break;
      }
      case "raw": {
        const r = encodeRaw(tensor, meta);
        Object.assign(headers, r.headers);
        out = r.body;
        break;
      }
      case "msgpack":
        out = encodeMsgpack(tensor, meta);
        break;
      case "protobuf":
        out = encodeProtobuf(tensor, { message: "EmbeddingsResponse", ...meta });
        break;
      case "arrow":
        out = await encodeArrow(tensor, meta);
        break;
    }
    if (options.gzip && /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""))) {
      out = gzipSync(out);
      headers["Content-Encoding"] = "gzip";
    }
    res.writeHead(200, headers);
    res.end(out);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, inFlight);
      handle(req, res, Buffer.concat(chunks).toString("utf8"))
        .catch((e: unknown) => {
          if (!res.headersSent) sendError(res, new DensewireError("unavailable", String(e)));
        })
        .finally(() => inFlight--);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  state.url = `http://127.0.0.1:${port}/v1`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
