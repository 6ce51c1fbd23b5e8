/**
 * Retries of the embeddings and tables clients, SPEC.md section 18 (the schedule of every densewire
 * client): a request answered **429** (the server's admission is full) or **503** (a model or table
 * still loading, a server draining), or whose connection failed before any answer came back (`fetch`
 * rejected with a `TypeError`: refused, reset, closed), is sent again after a full-jitter exponential
 * backoff, `draw · min(backoffMaxMs, backoffBaseMs·2ⁿ⁻¹)` for retry n with `draw` uniform in [0, 1),
 * added on top of the server's `Retry-After` (delay-seconds or an HTTP date). A `Retry-After` over a
 * minute is not waited for: the error comes at once, carrying it. Any other status (a 4xx that is the
 * caller's fault, 500, 502, 504) is never retried; an aborted signal ends a wait at once.
 */
import { DensewireConnectionError } from "./errors.js";

/** How a client retries (fields of the clients' options). */
export interface RetryOptions {
  /** Retries after the first attempt (default 2, as the OpenAI SDKs); 0 never retries. */
  maxRetries?: number;
  /** Bound of the first backoff in milliseconds (default 500). */
  backoffBaseMs?: number;
  /** Cap of one backoff in milliseconds (default 8000); `Retry-After` is waited on top of it. */
  backoffMaxMs?: number;
  /**
   * The source of the jitter's draws, uniform in [0, 1) (default `Math.random`): a seeded generator
   * gives a reproducible schedule, a constant tests one wait.
   */
  random?: () => number;
}

/** The defaults: 2 retries, backoff from 500 ms up to 8 s, `Math.random` draws. */
export const DEFAULT_RETRY: Readonly<Required<RetryOptions>> = Object.freeze({ maxRetries: 2, backoffBaseMs: 500, backoffMaxMs: 8000, random: Math.random });

/** A `Retry-After` longer than this (seconds) is not waited for: the error is returned at once. */
export const MAX_RETRY_AFTER_SECONDS = 60;

/** The options with defaults filled in and checked. */
export function retryPolicy(options: RetryOptions = {}): Required<RetryOptions> {
  const policy = {
    maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
    backoffBaseMs: options.backoffBaseMs ?? DEFAULT_RETRY.backoffBaseMs,
    backoffMaxMs: options.backoffMaxMs ?? DEFAULT_RETRY.backoffMaxMs,
    random: options.random ?? DEFAULT_RETRY.random,
  };
  if (!Number.isInteger(policy.maxRetries) || policy.maxRetries < 0) throw new RangeError(`maxRetries must be a non-negative integer, got ${policy.maxRetries}`);
  for (const key of ["backoffBaseMs", "backoffMaxMs"] as const) {
    if (!Number.isFinite(policy[key]) || policy[key] < 0) throw new RangeError(`${key} must be a non-negative number, got ${policy[key]}`);
  }
  if (typeof policy.random !== "function") throw new TypeError("random must be a function returning a number in [0, 1)");
  return policy;
}

/** The full-jitter backoff before retry `n` (1, 2, ...) in milliseconds: a draw times `min(max, base·2ⁿ⁻¹)`. */
export function backoffMs(n: number, policy: Required<RetryOptions> = DEFAULT_RETRY): number {
  return backoffSeconds(n, policy) * 1000;
}

/** The same in seconds, in SPEC.md 18.2's binary64 operations (the cap first when 2ⁿ⁻¹ overflows). */
function backoffSeconds(n: number, policy: Required<RetryOptions>): number {
  const bound = Math.min(policy.backoffMaxMs / 1000, (policy.backoffBaseMs / 1000) * 2 ** (n - 1));
  return policy.random() * bound;
}

/** SPEC.md 18.2 step 2: seconds from `now` (Unix seconds), or undefined for anything else. */
function retryAfterSeconds(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.replace(/^[ \t]+|[ \t]+$/g, "");
  if (/^[0-9]+$/.test(text)) return Number(text);
  if (!/^[A-Za-z]{3}/.test(text)) return undefined; // an HTTP date starts with its day's name
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(at / 1000 - now, 0);
}

/**
 * A `Retry-After` value (RFC 9110 section 10.2.3) in milliseconds from `now`: delay-seconds (ASCII
 * digits) or an HTTP date (a past date is 0); undefined when missing or anything else.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  const seconds = retryAfterSeconds(value, now / 1000);
  return seconds === undefined ? undefined : seconds * 1000;
}

/** What failed: an answer's status (0: the connection failed before any answer) and its `Retry-After`. */
export interface RetryFailure {
  status: number;
  retryAfter?: string | null;
  /** The clock, Unix seconds (default now): for a `Retry-After` that is a date. */
  now?: number;
}

/**
 * SPEC.md 18.2: the seconds to wait before retry `n` (1 for the first) of a request that failed so,
 * or undefined to give up (a status not retried, the retries spent, or a `Retry-After` over a minute).
 * The retry loop's only rule; its draw comes from `policy.random`.
 */
export function retryWait(n: number, failure: RetryFailure, policy: Required<RetryOptions> = DEFAULT_RETRY): number | undefined {
  if (failure.status !== 0 && failure.status !== 429 && failure.status !== 503) return undefined;
  if (n > policy.maxRetries) return undefined;
  const seconds = retryAfterSeconds(failure.retryAfter, failure.now ?? Date.now() / 1000);
  if (seconds !== undefined && seconds > MAX_RETRY_AFTER_SECONDS) return undefined;
  const jitter = backoffSeconds(n, policy);
  return seconds === undefined ? jitter : seconds + jitter;
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** An answer and how many times the request was sent to get it. */
export interface Attempted {
  response: Response;
  attempts: number;
}

/**
 * Sends a request with `fetch`, retrying under `policy` (see the module's comment). Resolves with the
 * first answer that is not retried (or the last one, a 429 or 503, when the retries are spent) and the
 * number of attempts; rejects with a {@link DensewireConnectionError} when the connection kept failing,
 * or with the signal's reason when it aborts.
 */
export async function fetchWithRetry(fetchFn: typeof fetch, url: string, init: RequestInit, policy: Required<RetryOptions>): Promise<Attempted> {
  const signal = init.signal ?? undefined;
  for (let attempt = 1; ; attempt++) {
    let wait: number | undefined;
    try {
      const response = await fetchFn(url, init);
      if (response.status !== 429 && response.status !== 503) return { response, attempts: attempt };
      wait = retryWait(attempt, { status: response.status, retryAfter: response.headers.get("retry-after") }, policy);
      if (wait === undefined) return { response, attempts: attempt };
      await response.body?.cancel().catch(() => undefined);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      // fetch rejects with a TypeError when no answer came (refused, reset, closed); anything else is no connection failure
      if (!(e instanceof TypeError)) throw e;
      wait = retryWait(attempt, { status: 0 }, policy);
      if (wait === undefined) {
        const cause = (e as { cause?: { message?: unknown } }).cause;
        const detail = typeof cause?.message === "string" && cause.message !== "" ? `${e.message}: ${cause.message}` : e.message;
        throw new DensewireConnectionError(`${init.method ?? "GET"} ${url}: ${detail}`, attempt, { cause: e });
      }
    }
    await sleep(Math.ceil(wait * 1000), signal); // whole milliseconds, rounded up: never before Retry-After
  }
}
