/**
 * A tables client over `fetch` (SPEC.md section 15.9): `GET {baseURL}/tables` and
 * `GET {baseURL}/tables/{name}`, asking for columnar Protobuf first (densewire's smallest body on the
 * wire), decoding whatever the server answers by its `Content-Type` (JSON objects and CSV with the
 * schema of `Densewire-Columns`), with ETag revalidation. The runtime handles `Content-Encoding`
 * (zstd, br, gzip) itself. Works in browsers, Node 20+, Deno and Bun.
 */
import { httpError } from "../client.js";
import { describe } from "../dtypes.js";
import { DensewireError } from "../errors.js";
import { type RetryOptions, fetchWithRetry, retryPolicy } from "../retry.js";
import { decodeTable } from "./index.js";
import { type ColumnSpec, type Table, type TableFormat, TABLE_MEDIA_TYPES, parseColumnType, tableFormatOfContentType } from "./model.js";

/** Protobuf, then MessagePack, then JSON columns, then JSON objects. Arrow and CSV only when asked for. */
export const DEFAULT_TABLE_FORMATS: readonly TableFormat[] = Object.freeze(["protobuf", "msgpack", "json-columns", "json"] as TableFormat[]);

/** The `Accept` header asking for `formats` in order of preference: q=1, 0.9, 0.8, ... (at least 0.1). */
export function tableAcceptHeader(formats: readonly TableFormat[] = DEFAULT_TABLE_FORMATS): string {
  if (formats.length === 0) throw new TypeError("at least one table format is needed");
  return formats
    .map((f, i) => {
      const type = TABLE_MEDIA_TYPES[f];
      if (type === undefined) throw new TypeError(`unknown table format ${String(f)}`);
      const q = Math.max(10 - i, 1);
      return q === 10 ? type : `${type};q=0.${q}`;
    })
    .join(", ");
}

/** One table of `GET /v1/tables`. */
export interface TableInfo {
  name: string;
  rows: number;
  columns: ColumnSpec[];
  /** Opaque; changes when the data does. */
  version: string;
  /** RFC 3339 time of the last refresh. */
  refreshedAt: string;
  /** The formats the server serves it in. */
  formats: TableFormat[];
}

/** Options of {@link TablesClient}: as for the embeddings client, retries included. */
export interface TablesClientOptions extends RetryOptions {
  /** The API root: requests go to `${baseURL}/tables`. Default `http://localhost:8000/v1`. */
  baseURL?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Formats to ask for, best first (default protobuf, msgpack, json-columns, json). */
  formats?: readonly TableFormat[];
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
}

/** Options of {@link TablesClient.getTable}. */
export interface GetTableOptions {
  /** One format (sent as `?format=`) or formats in order of preference (sent as `Accept`). */
  format?: TableFormat | readonly TableFormat[];
  /** Cancels the request. */
  signal?: AbortSignal;
  /** An ETag from an earlier answer, sent as `If-None-Match`; a 304 answer is then `notModified`. */
  ifNoneMatch?: string;
  /**
   * An earlier result of this call: its ETag is sent as `If-None-Match` (unless `ifNoneMatch` is given)
   * and a 304 answer returns its table.
   */
  cached?: TableResult;
  /** Overrides the client's `maxRetries` for this call. */
  maxRetries?: number;
}

/** What {@link TablesClient.getTable} returns. */
export interface TableResult {
  /** The decoded table; on a 304 the `cached` table, or undefined when none was passed. */
  table: Table | undefined;
  /** True when the server answered 304 Not Modified (no body was sent). */
  notModified: boolean;
  /** The response's `ETag` (strong, per format and content coding), or undefined. */
  etag: string | undefined;
  /** The format the server chose (from `Content-Type`); on a 304 the cached result's. */
  format: TableFormat | undefined;
  /** Bytes of the body after the runtime undid `Content-Encoding` (0 on a 304). */
  bytes: number;
  /** `Content-Encoding` of the response (`zstd`, `br`, `gzip`), or undefined. */
  contentEncoding: string | undefined;
  /** `Content-Length` when the response states it: the bytes on the wire for a compressed body. */
  contentLength: number | undefined;
  /** The HTTP status (200 or 304). */
  status: number;
  /** The response headers. */
  headers: Headers;
}

/** A client for densewire's tables API (`GET /v1/tables`, `GET /v1/tables/{name}`). */
export class TablesClient {
  readonly baseURL: string;
  readonly formats: readonly TableFormat[];
  readonly #apiKey: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #retry: Required<RetryOptions>;

  constructor(options: TablesClientOptions = {}) {
    this.baseURL = (options.baseURL ?? "http://localhost:8000/v1").replace(/\/+$/, "");
    this.formats = options.formats ?? DEFAULT_TABLE_FORMATS;
    tableAcceptHeader(this.formats); // validates
    this.#apiKey = options.apiKey;
    this.#headers = { ...options.headers };
    const f = options.fetch ?? (globalThis.fetch as typeof fetch | undefined);
    if (f === undefined) throw new Error("densewire: no fetch in this runtime; pass options.fetch");
    this.#fetch = f;
    this.#retry = retryPolicy(options);
  }

  #send(url: string, init: RequestInit, maxRetries: number | undefined) {
    const policy = maxRetries === undefined ? this.#retry : retryPolicy({ ...this.#retry, maxRetries });
    return fetchWithRetry(this.#fetch, url, init, policy);
  }

  #requestHeaders(accept: string): Record<string, string> {
    const headers: Record<string, string> = { Accept: accept, ...this.#headers };
    if (this.#apiKey !== undefined) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    return headers;
  }

  /** Lists the server's tables (`GET /v1/tables`). */
  async listTables(options: { signal?: AbortSignal; maxRetries?: number } = {}): Promise<TableInfo[]> {
    const init: RequestInit = { headers: this.#requestHeaders("application/json") };
    if (options.signal !== undefined) init.signal = options.signal;
    const { response, attempts } = await this.#send(`${this.baseURL}/tables`, init, options.maxRetries);
    if (!response.ok) throw await httpError(response, attempts);
    let doc: unknown;
    try {
      doc = await response.json();
    } catch (e) {
      throw new DensewireError("malformed", `the table list is not JSON: ${(e as Error).message}`, {}, { cause: e });
    }
    const data = (doc as { data?: unknown } | null)?.data;
    if (!Array.isArray(data)) throw new DensewireError("invalid_field", `must be an array, got ${describe(data)}`, { field: "data" });
    return data.map((t: Record<string, unknown>, i): TableInfo => {
      const at = `data[${i}]`;
      const bad = (key: string, what: string) => new DensewireError("invalid_field", `must be ${what}, got ${describe(t?.[key])}`, { field: `${at}.${key}` });
      if (typeof t !== "object" || t === null) throw new DensewireError("invalid_field", `must be an object, got ${describe(t)}`, { field: at });
      if (typeof t["name"] !== "string") throw bad("name", "a string");
      if (typeof t["rows"] !== "number" || !Number.isSafeInteger(t["rows"]) || t["rows"] < 0) throw bad("rows", "a non-negative integer");
      if (!Array.isArray(t["columns"])) throw bad("columns", "an array");
      const columns = (t["columns"] as Record<string, unknown>[]).map((c, j) => {
        if (typeof c?.["name"] !== "string") throw new DensewireError("invalid_field", `must be a string, got ${describe(c?.["name"])}`, { field: `${at}.columns[${j}].name` });
        return { name: c["name"], type: parseColumnType(c["type"], `${at}.columns[${j}].type`) };
      });
      const formats = Array.isArray(t["formats"]) ? (t["formats"] as unknown[]).filter((f): f is TableFormat => typeof f === "string" && f in TABLE_MEDIA_TYPES) : [];
      return {
        name: t["name"],
        rows: t["rows"],
        columns,
        version: typeof t["version"] === "string" ? t["version"] : String(t["version"] ?? ""),
        refreshedAt: typeof t["refreshed_at"] === "string" ? t["refreshed_at"] : "",
        formats,
      };
    });
  }

  /**
   * Gets and decodes a table (`GET /v1/tables/{name}`), by default asking for Protobuf, then
   * MessagePack, then the JSON layouts. With `ifNoneMatch` or `cached`, a 304 answer returns
   * `notModified: true` (and the cached table) without a body. A 429, a 503 or a failed connection is
   * retried (`maxRetries`). Errors: a {@link DensewireHTTPError} for a non-2xx status (404 `not_found`
   * for an unknown table; a `RateLimitError` for a 429), a `DensewireConnectionError` for a connection
   * that kept failing, a {@link DensewireError} for a body that
   * does not decode or a `Content-Type` that is no table format (`unsupported_media_type`).
   */
  async getTable(name: string, options: GetTableOptions = {}): Promise<TableResult> {
    let url = `${this.baseURL}/tables/${encodeURIComponent(name)}`;
    let accept: string;
    if (typeof options.format === "string") {
      if (!(options.format in TABLE_MEDIA_TYPES)) throw new TypeError(`unknown table format ${options.format}`);
      url += `?format=${options.format}`;
      accept = TABLE_MEDIA_TYPES[options.format];
    } else {
      accept = tableAcceptHeader(options.format ?? this.formats);
    }
    const headers = this.#requestHeaders(accept);
    const etag = options.ifNoneMatch ?? options.cached?.etag;
    if (etag !== undefined) headers["If-None-Match"] = etag;
    const init: RequestInit = { headers };
    if (options.signal !== undefined) init.signal = options.signal;
    const { response, attempts } = await this.#send(url, init, options.maxRetries);
    const contentEncoding = response.headers.get("content-encoding") ?? undefined;
    const length = response.headers.get("content-length");
    const common = {
      etag: response.headers.get("etag") ?? undefined,
      contentEncoding,
      contentLength: length !== null && /^[0-9]+$/.test(length) ? Number(length) : undefined,
      status: response.status,
      headers: response.headers,
    };
    if (response.status === 304) {
      await response.body?.cancel().catch(() => undefined);
      return { ...common, etag: common.etag ?? etag, table: options.cached?.table, notModified: true, format: options.cached?.format, bytes: 0 };
    }
    if (!response.ok) throw await httpError(response, attempts);
    const contentType = response.headers.get("content-type");
    const format = tableFormatOfContentType(contentType);
    if (format === undefined) {
      await response.body?.cancel().catch(() => undefined);
      throw new DensewireError("unsupported_media_type", `cannot decode a table of type ${JSON.stringify(contentType)}`, { field: "Content-Type" });
    }
    const body = new Uint8Array(await response.arrayBuffer());
    const table = await decodeTable(body, format, { headers: response.headers });
    return { ...common, table, notModified: false, format, bytes: body.length };
  }
}
