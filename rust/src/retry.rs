//! Retries of the clients (feature `reqwest`), SPEC.md section 18: what [`Client`](crate::Client)
//! and [`TablesClient`](crate::TablesClient) send goes through [`RetryPolicy::send`], which retries
//! a 429, a 503 and a connection that failed before the server answered, after
//! [`RetryPolicy::wait`]: full jitter on top of the server's `Retry-After`, 2 retries by default, as
//! the OpenAI SDKs do. Any other status, a timeout, an error reading the body and a `Retry-After`
//! over a minute are never retried; the error of the last attempt says how many were made.

use crate::error::{Error, ErrorKind, Result, err};
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A `Retry-After` longer than this (seconds) is not waited for: the error is returned at once,
/// carrying it ([`Error::retry_after`]).
pub const MAX_RETRY_AFTER: f64 = 60.0;

/// The retry schedule of a client (SPEC.md section 18.2): `max_retries` retries (default 2) of a
/// request answered 429 or 503 or whose connection failed before any answer; retry `n` (1 for the
/// first) waits `draw * min(cap, base * 2^(n-1))` seconds (full jitter; `base` 0.5 s and `cap` 8 s
/// by default) on top of the server's `Retry-After`, `draw` uniform in [0, 1) from the policy's
/// random source ([`RetryPolicy::with_random`]).
///
/// ```
/// use densewire::RetryPolicy;
/// let p = RetryPolicy::default().with_random(|| 0.5);
/// // a 429 asking for 1 s, first retry: 1 s plus half of 0.5 s
/// assert_eq!(p.wait(1, 429, Some("1"), 0.0), Some(1.25));
/// assert_eq!(p.wait(1, 429, Some("61"), 0.0), None); // more than a minute: give up
/// assert_eq!(p.wait(3, 503, None, 0.0), None); // the 2 retries are spent
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    max_retries: u32,
    base: f64,
    cap: f64,
    random: Arc<dyn Fn() -> f64 + Send + Sync>,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base", &self.base)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy { max_retries: 2, base: 0.5, cap: 8.0, random: Arc::new(random_fraction) }
    }
}

/// A response read whole, with the number of requests it took.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub attempts: u32,
}

impl Reply {
    /// The error of a non-2xx reply: its OpenAI envelope, with the number of attempts and the
    /// `Retry-After` it asked for.
    pub(crate) fn error(&self) -> Error {
        let retry_after = retry_after_header(&self.headers).and_then(|v| parse_retry_after(v, now()));
        Error::from_envelope(self.status, &self.body).after_attempts(self.attempts).with_retry_after(retry_after)
    }
}

pub(crate) fn transport(e: reqwest::Error) -> Error {
    err(ErrorKind::Unavailable, format!("HTTP transport failed: {e}"))
}

fn retry_after_header(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok())
}

/// Whether a transport error happened before the server began to answer: the connection could not
/// be made, or it was refused, reset or closed before a status line came back. Sending again is
/// safe because both APIs are idempotent (embedding texts and reading a table change nothing on the
/// server). A timeout is not retried (the server may still be working on the request), nor is an
/// error while reading a body (that one comes from reading the reply, not from sending).
fn failed_before_reply(e: &reqwest::Error) -> bool {
    (e.is_connect() || e.is_request()) && !e.is_timeout()
}

/// The clock as Unix seconds.
fn now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A `Retry-After` value (RFC 9110 section 10.2.3) in seconds from `now` (Unix seconds), SPEC.md
/// 18.2: after removing leading and trailing spaces and tabs, ASCII digits are delay-seconds (any
/// number of them, read correctly rounded: a huge one is more than a minute), an HTTP date
/// (IMF-fixdate, RFC 850 or asctime) is its distance from `now` (a past one is 0); anything else
/// (`1.5`, `-1`, `+3`, `soon`, empty) is `None`.
///
/// ```
/// use densewire::parse_retry_after;
/// assert_eq!(parse_retry_after(" 007\t", 0.0), Some(7.0));
/// assert_eq!(parse_retry_after("Wed, 25 Nov 2026 12:00:10 GMT", 1795608000.0), Some(10.0));
/// assert_eq!(parse_retry_after("1.5", 0.0), None);
/// ```
pub fn parse_retry_after(value: &str, now: f64) -> Option<f64> {
    let v = value.trim_matches(|c| c == ' ' || c == '\t');
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<f64>().ok();
    }
    if !(v.len() >= 3 && v.as_bytes()[..3].iter().all(u8::is_ascii_alphabetic)) {
        return None; // a date begins with its day's name
    }
    let at = httpdate::parse_http_date(v).ok()?.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
    Some(0f64.max(at as f64 - now))
}

/// A uniform random fraction in [0, 1): 53 random bits times 2^-53, from the standard library's
/// randomly keyed hasher (a new key per call), so the crate needs no random-number dependency.
fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `x * 2^e` in one rounding (multiplying by powers of two is exact until it overflows to infinity).
fn scale(x: f64, mut e: u32) -> f64 {
    let mut y = x;
    while e > 1000 && y.is_finite() && y != 0.0 {
        y *= 2f64.powi(1000);
        e -= 1000;
    }
    if y == 0.0 { y } else { y * 2f64.powi(e.min(1000) as i32) }
}

impl RetryPolicy {
    /// `max_retries` retries, the backoff's first bound `base` and its `cap` in seconds (finite,
    /// not negative), drawing from the default random source.
    pub fn new(max_retries: u32, base: f64, cap: f64) -> Result<RetryPolicy> {
        if !(base.is_finite() && cap.is_finite() && base >= 0.0 && cap >= 0.0) {
            return Err(err(
                ErrorKind::InvalidField,
                format!("the backoff's base and cap must be finite non-negative seconds, got {base} and {cap}"),
            ));
        }
        Ok(RetryPolicy { max_retries, base, cap, ..RetryPolicy::default() })
    }

    /// The same policy drawing its jitter from `random`, which returns numbers uniform in [0, 1)
    /// (a seeded generator for a reproducible schedule, a constant to test one wait). It is called
    /// once before each wait, from the task that sends the request.
    pub fn with_random(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> RetryPolicy {
        self.random = Arc::new(random);
        self
    }

    /// Retries after the first attempt.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The backoff's first bound, seconds.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// The backoff's cap, seconds.
    pub fn cap(&self) -> f64 {
        self.cap
    }

    pub(crate) fn set_max_retries(&mut self, n: u32) {
        self.max_retries = n;
    }

    pub(crate) fn set_backoff(&mut self, base: Duration, cap: Duration) {
        self.base = base.as_secs_f64();
        self.cap = cap.as_secs_f64();
    }

    /// Seconds to wait before retry `retry` (1 for the first) of a request whose attempt failed with
    /// `status` (0: the connection failed before any byte of an answer) and this `Retry-After`
    /// value, `now` the clock as Unix seconds (for dates); `None`: give up (a status that is not
    /// retried, the retries spent, or the server asking for more than [`MAX_RETRY_AFTER`]
    /// seconds). The retry loop's only rule (SPEC.md 18.2), in f64 in the spec's order.
    pub fn wait(&self, retry: u32, status: u16, retry_after: Option<&str>, now: f64) -> Option<f64> {
        if !matches!(status, 0 | 429 | 503) || retry > self.max_retries {
            return None;
        }
        let seconds = retry_after.and_then(|v| parse_retry_after(v, now));
        if seconds.is_some_and(|s| s > MAX_RETRY_AFTER) {
            return None;
        }
        let bound = self.cap.min(scale(self.base, retry.saturating_sub(1)));
        let jitter = (self.random)() * bound;
        Some(match seconds {
            Some(s) => s + jitter,
            None => jitter,
        })
    }

    /// Sends the request `make` builds (once per attempt) and reads the response whole, retrying a
    /// 429, a 503 and a connection that failed before a reply as [`RetryPolicy::wait`] says. The
    /// last reply is returned whatever its status; a transport error is `unavailable` with the
    /// number of attempts.
    pub(crate) async fn send(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Reply> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let wait = match make().send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let headers = resp.headers().clone();
                    // Read whole even when retrying, so that the connection can be used again.
                    let body = resp.bytes().await.map_err(|e| transport(e).after_attempts(attempts))?;
                    let reply = Reply { status, headers, body, attempts };
                    if !matches!(status, 429 | 503) {
                        return Ok(reply);
                    }
                    match self.wait(attempts, status, retry_after_header(&reply.headers), now()) {
                        Some(wait) => wait,
                        None => return Ok(reply),
                    }
                }
                Err(e) if failed_before_reply(&e) => match self.wait(attempts, 0, None, now()) {
                    Some(wait) => wait,
                    None => return Err(transport(e).after_attempts(attempts)),
                },
                Err(e) => return Err(transport(e).after_attempts(attempts)),
            };
            // Whole nanoseconds, rounded up: never sooner than asked.
            tokio::time::sleep(Duration::from_nanos((wait * 1e9).ceil() as u64)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = now();
        assert_eq!(parse_retry_after("3", now), Some(3.0));
        assert_eq!(parse_retry_after(" \t0 ", now), Some(0.0));
        assert_eq!(parse_retry_after("120", now), Some(120.0));
        assert_eq!(parse_retry_after("99999999999999999999", now), Some(1e20));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(0.0));
        let later = SystemTime::now() + Duration::from_secs(120);
        let d = parse_retry_after(&httpdate::fmt_http_date(later), now).unwrap();
        assert!(d > 100.0 && d <= 120.0, "{d:?}");
        for bad in ["", "-1", "1.5", "+3", "soon", "3 s", "\u{a0}3"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_bound_on_top_of_retry_after() {
        let r = RetryPolicy::new(9, 0.1, 0.35).unwrap();
        for (retry, bound) in [(1, 0.1), (2, 0.2), (3, 0.35), (4, 0.35), (9, 0.35)] {
            let waits: Vec<f64> = (0..200).map(|_| r.wait(retry, 0, None, 0.0).unwrap()).collect();
            assert!(waits.iter().all(|w| (0.0..bound).contains(w)), "retry {retry}: {waits:?}");
            // Jitter: the waits are spread, not one value.
            assert!(waits.iter().any(|w| *w < bound / 2.0), "retry {retry}");
            assert!(waits.iter().any(|w| *w >= bound / 2.0), "retry {retry}");
        }
        let on_top: Vec<f64> = (0..200).map(|_| r.wait(1, 429, Some("3"), 0.0).unwrap()).collect();
        assert!(on_top.iter().all(|w| (3.0..3.1).contains(w)), "never max(jitter, Retry-After): {on_top:?}");
        assert_eq!(r.wait(1, 500, None, 0.0), None);
        assert_eq!(r.wait(10, 0, None, 0.0), None);
        assert!(RetryPolicy::new(2, -1.0, 8.0).is_err() && RetryPolicy::new(2, 0.5, f64::NAN).is_err());
    }

    #[test]
    fn a_huge_retry_gives_the_cap_and_a_zero_base_nothing() {
        let p = RetryPolicy::default().with_random(|| 0.5);
        let p = RetryPolicy { max_retries: u32::MAX, ..p };
        assert_eq!(p.wait(u32::MAX, 0, None, 0.0), Some(4.0));
        let z = RetryPolicy { base: 0.0, ..p };
        assert_eq!(z.wait(5000, 0, None, 0.0), Some(0.0));
    }

    #[test]
    fn a_long_retry_after_is_not_waited_for() {
        let r = RetryPolicy::default();
        assert_eq!(r.wait(1, 429, Some("61"), 0.0), None);
        let w = r.wait(1, 503, Some("2"), 0.0).unwrap();
        assert!((2.0..2.5).contains(&w), "{w:?}");
    }
}
