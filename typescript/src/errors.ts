/**
 * Errors (SPEC.md section 11). Every decoding or encoding failure is a {@link DensewireError} carrying
 * its category, a message saying what was wrong, and where: `offset` (characters of a Base64 string,
 * bytes of a binary body) and/or `field` (a JSON path such as `data[3].embedding`, a MessagePack or
 * Protobuf field name, or an HTTP header name).
 *
 * An HTTP error answered by a server is a {@link DensewireHTTPError} instead: it carries the status
 * and the server's OpenAI-style error envelope (`code`, `param`, `message`, `offset`), and how many
 * times the client sent the request (`attempts`, retries included); a 429 is its subclass
 * {@link RateLimitError}. A connection that kept failing is a {@link DensewireConnectionError}.
 */

/** The error categories of SPEC.md section 11, shared by every densewire implementation. */
export type ErrorCategory =
  | "invalid_base64"
  | "length_mismatch"
  | "shape_mismatch"
  | "unknown_dtype"
  | "truncated"
  | "malformed"
  | "invalid_field"
  | "non_finite"
  | "unauthorized"
  | "not_found"
  | "payload_too_large"
  | "unsupported_media_type"
  | "not_acceptable"
  | "unavailable"
  | "rate_limited";

/** The HTTP status of each category (SPEC.md section 11). */
export const HTTP_STATUS: Readonly<Record<ErrorCategory, number>> = Object.freeze({
  invalid_base64: 400,
  length_mismatch: 400,
  shape_mismatch: 400,
  unknown_dtype: 400,
  truncated: 400,
  malformed: 400,
  invalid_field: 422,
  non_finite: 422,
  unauthorized: 401,
  not_found: 404,
  payload_too_large: 413,
  unsupported_media_type: 415,
  not_acceptable: 406,
  unavailable: 503,
  rate_limited: 429,
});

/** Where an error was found: an offset, a field, or both. */
export interface ErrorLocation {
  offset?: number | undefined;
  field?: string | undefined;
}

/** A densewire decoding or encoding error, with its category and location. */
export class DensewireError extends Error {
  /** The category (SPEC.md section 11); also the `code` of the HTTP error envelope. */
  readonly category: ErrorCategory;
  /** Characters of a Base64 string or bytes of a binary body, from 0; undefined when not applicable. */
  readonly offset: number | undefined;
  /** A JSON path, MessagePack/Protobuf field name or HTTP header name; undefined when not applicable. */
  readonly field: string | undefined;

  constructor(category: ErrorCategory, message: string, where: ErrorLocation = {}, options?: { cause?: unknown }) {
    const prefix = where.field !== undefined ? `${where.field}: ` : "";
    super(prefix + message, options);
    this.name = "DensewireError";
    this.category = category;
    this.offset = where.offset;
    this.field = where.field;
  }

  /** The HTTP status a server answers this error with. */
  get status(): number {
    return HTTP_STATUS[this.category];
  }

  /** The OpenAI-style error envelope a server would send for this error (SPEC.md section 11). */
  toJSON(): { error: { message: string; type: string; param: string | null; code: ErrorCategory; offset?: number } } {
    const error: { message: string; type: string; param: string | null; code: ErrorCategory; offset?: number } = {
      message: this.message,
      type: this.status >= 500 ? "server_error" : "invalid_request_error",
      param: this.field ?? null,
      code: this.category,
    };
    if (this.offset !== undefined) error.offset = this.offset;
    return { error };
  }
}

/** An error answered by an embeddings server: a non-2xx status with its error envelope. */
export class DensewireHTTPError extends Error {
  /** The HTTP status, e.g. 400, 401, 422, 503. */
  readonly status: number;
  /** `error.code` of the envelope: a densewire category, or another server's code (may be null). */
  readonly code: string | null;
  /** `error.param`: the offending field, or null. */
  readonly param: string | null;
  /** `error.type`, e.g. `invalid_request_error` or `server_error`, or null. */
  readonly type: string | null;
  /** `error.offset` (densewire servers), or undefined. */
  readonly offset: number | undefined;
  /** The response body as text (the envelope, or whatever the server sent). */
  readonly body: string;
  /** How many times the client sent the request (retries included); 0 when not known. */
  readonly attempts: number;
  /**
   * The answer's `Retry-After` in milliseconds (undefined without one): after a 429 or 503 that asked
   * for more than a minute the client gives up at once (SPEC.md 18.2), and this says when to come back.
   */
  readonly retryAfterMs: number | undefined;

  constructor(
    status: number,
    message: string,
    details: { code?: string | null; param?: string | null; type?: string | null; offset?: number; body?: string; attempts?: number; retryAfterMs?: number } = {},
  ) {
    const attempts = details.attempts ?? 0;
    super(attempts > 0 ? `${message} (${attempts} attempt${attempts === 1 ? "" : "s"})` : message);
    this.name = "DensewireHTTPError";
    this.status = status;
    this.code = details.code ?? null;
    this.param = details.param ?? null;
    this.type = details.type ?? null;
    this.offset = details.offset;
    this.body = details.body ?? "";
    this.attempts = attempts;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** A 429 answer: the server's admission is full (`densewire serve --max-concurrent-requests`) after every retry. */
export class RateLimitError extends DensewireHTTPError {
  constructor(message: string, details: ConstructorParameters<typeof DensewireHTTPError>[2] = {}) {
    super(429, message, details);
    this.name = "RateLimitError";
  }
}

/** The connection failed before any answer came back (refused, reset, closed), on every attempt. */
export class DensewireConnectionError extends Error {
  /** How many times the client tried. */
  readonly attempts: number;

  constructor(message: string, attempts: number, options?: { cause?: unknown }) {
    super(`${message} (${attempts} attempt${attempts === 1 ? "" : "s"})`, options);
    this.name = "DensewireConnectionError";
    this.attempts = attempts;
  }
}
