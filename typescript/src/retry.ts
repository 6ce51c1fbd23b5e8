/**
 * Retries of the embeddings and tables clients: a request answered **429** (the server's admission is
 * full) or **503** (a model or table still loading, a server draining), or whose connection failed
 * before any answer came back (`fetch` rejected with a `TypeError`: refused, reset, closed), is sent
 * again after a full-jitter exponential backoff, uniform in `[0, min(backoffMaxMs, backoffBaseMs·2ⁿ⁻¹))`
 * for retry n, added to the server's `Retry-After` (seconds or an HTTP date, at most a minute) when
 * it sent one. A 4xx that is the caller's fault is never retried; an aborted signal ends a wait at once.
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
}

/** The defaults: 2 retries, backoff from 500 ms up to 8 s. */
export const DEFAULT_RETRY: Readonly<Required<RetryOptions>> = Object.freeze({ maxRetries: 2, backoffBaseMs: 500, backoffMaxMs: 8000 });

const MAX_RETRY_AFTER_MS = 60_000;

/** The options with defaults filled in and checked. */
export function retryPolicy(options: RetryOptions = {}): Required<RetryOptions> {
  const policy = {
    maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
    backoffBaseMs: options.backoffBaseMs ?? DEFAULT_RETRY.backoffBaseMs,
    backoffMaxMs: options.backoffMaxMs ?? DEFAULT_RETRY.backoffMaxMs,
  };
  if (!Number.isInteger(policy.maxRetries) || policy.maxRetries < 0) throw new RangeError(`maxRetries must be a non-negative integer, got ${policy.maxRetries}`);
  for (const key of ["backoffBaseMs", "backoffMaxMs"] as const) {
    if (!Number.isFinite(policy[key]) || policy[key] < 0) throw new RangeError(`${key} must be a non-negative number, got ${policy[key]}`);
  }
  return policy;
}

/** The full-jitter backoff before retry `n` (1, 2, ...) in milliseconds: uniform in `[0, min(max, base·2ⁿ⁻¹))`. */
export function backoffMs(n: number, policy: Required<RetryOptions> = DEFAULT_RETRY): number {
  const bound = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** Math.min(n - 1, 60));
  return Math.random() * bound;
}

/**
 * A `Retry-After` value (RFC 9110 section 10.2.3) in milliseconds from `now`: delay-seconds or an
 * HTTP date (a past date is 0), at most a minute; undefined when missing or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^[0-9]+(\.[0-9]+)?$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
  if (!/[a-z]/i.test(text)) return undefined; // "-1" and other numbers are no date either
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(at - now, 0), MAX_RETRY_AFTER_MS);
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
    let wait = 0;
    try {
      const response = await fetchFn(url, init);
      if ((response.status !== 429 && response.status !== 503) || attempt > policy.maxRetries) return { response, attempts: attempt };
      wait = parseRetryAfter(response.headers.get("retry-after")) ?? 0;
      await response.body?.cancel().catch(() => undefined);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      // fetch rejects with a TypeError when no answer came (refused, reset, closed); anything else is no connection failure
      if (!(e instanceof TypeError)) throw e;
      if (attempt > policy.maxRetries) {
        const cause = (e as { cause?: { message?: unknown } }).cause;
        const detail = typeof cause?.message === "string" && cause.message !== "" ? `${e.message}: ${cause.message}` : e.message;
        throw new DensewireConnectionError(`${init.method ?? "GET"} ${url}: ${detail}`, attempt, { cause: e });
      }
    }
    await sleep(wait + backoffMs(attempt, policy), signal);
  }
}
