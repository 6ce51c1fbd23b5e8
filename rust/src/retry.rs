//! Retries of the clients (feature `reqwest`): what [`Client`](crate::Client) and
//! [`TablesClient`](crate::TablesClient) send goes through [`Retry::send`], which retries a 429, a
//! 503 and a connection that failed before the server answered, as the OpenAI SDKs do: 2 retries by
//! default, exponential backoff with full jitter, and the server's `Retry-After` (seconds or an HTTP
//! date) as the least wait. Any other status, a timeout and an error reading the body are never
//! retried; the error of the last attempt says how many were made.

use crate::error::{Error, ErrorKind, Result, err};
use bytes::Bytes;
use std::time::{Duration, SystemTime};

/// A `Retry-After` longer than this is not waited for: the error is returned at once.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The retry policy of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Retries after the first attempt (default 2).
    pub max_retries: u32,
    /// The backoff's first ceiling (default 0.5 s), doubled at each retry ...
    pub base: Duration,
    /// ... up to this (default 8 s). The wait is uniform between 0 and the ceiling (full jitter).
    pub cap: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry { max_retries: 2, base: Duration::from_millis(500), cap: Duration::from_secs(8) }
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
    /// The error of a non-2xx reply: its OpenAI envelope, with the number of attempts.
    pub(crate) fn error(&self) -> Error {
        Error::from_envelope(self.status, &self.body).after_attempts(self.attempts)
    }
}

pub(crate) fn transport(e: reqwest::Error) -> Error {
    err(ErrorKind::Unavailable, format!("HTTP transport failed: {e}"))
}

/// Whether a transport error happened before the server began to answer: the connection could not
/// be made, or it was refused, reset or closed before a status line came back. Sending again is
/// safe because both APIs are idempotent (embedding texts and reading a table change nothing on the
/// server). A timeout is not retried (the server may still be working on the request), nor is an
/// error while reading a body.
fn failed_before_reply(e: &reqwest::Error) -> bool {
    e.is_connect() || (e.is_request() && !e.is_timeout())
}

/// The delay a `Retry-After` value asks for: delay-seconds, or an HTTP date (IMF-fixdate, RFC 850
/// or asctime, as RFC 9110 section 10.2.3 allows); a date in the past is no delay.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// A uniform random fraction in [0, 1), from the standard library's randomly keyed hasher (a new
/// key per call), so the crate needs no random-number dependency for jitter.
fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl Retry {
    /// The full-jitter backoff before retry `retry` (0 for the first): uniform in
    /// [0, min(cap, base * 2^retry)).
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1u32 << retry.min(30)).min(self.cap);
        ceiling.mul_f64(random_fraction())
    }

    /// The wait before retry `retry`, or `None` when the server asks for more than
    /// [`MAX_RETRY_AFTER`]. With `Retry-After`, the wait is that plus the backoff, so that clients
    /// told the same `Retry-After` do not all come back at the same instant.
    fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        match retry_after {
            Some(ra) if ra > MAX_RETRY_AFTER => None,
            Some(ra) => Some(ra + self.backoff(retry)),
            None => Some(self.backoff(retry)),
        }
    }

    /// Sends the request `make` builds (once per attempt) and reads the response whole, retrying a
    /// 429, a 503 and a connection that failed before a reply, at most `max_retries` times. The
    /// last reply is returned whatever its status; a transport error is `unavailable` with the
    /// number of attempts.
    pub(crate) async fn send(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Reply> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let retries_left = attempts <= self.max_retries;
            let wait = match make().send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let headers = resp.headers().clone();
                    // Read whole even when retrying, so that the connection can be used again.
                    let body = resp.bytes().await.map_err(|e| transport(e).after_attempts(attempts))?;
                    let reply = Reply { status, headers, body, attempts };
                    if !(retries_left && matches!(status, 429 | 503)) {
                        return Ok(reply);
                    }
                    let retry_after = reply
                        .headers
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    match self.wait(attempts - 1, retry_after) {
                        Some(wait) => wait,
                        None => return Ok(reply),
                    }
                }
                Err(e) if retries_left && failed_before_reply(&e) => self.backoff(attempts - 1),
                Err(e) => return Err(transport(e).after_attempts(attempts)),
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        let later = SystemTime::now() + Duration::from_secs(120);
        let d = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(d > Duration::from_secs(100) && d <= Duration::from_secs(120), "{d:?}");
        for bad in ["", "-1", "1.5", "soon"] {
            assert_eq!(parse_retry_after(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_ceiling() {
        let r = Retry { max_retries: 5, base: Duration::from_millis(100), cap: Duration::from_millis(350) };
        let ceilings = [100, 200, 350, 350];
        for (retry, ceiling) in ceilings.into_iter().enumerate() {
            let waits: Vec<Duration> = (0..200).map(|_| r.backoff(retry as u32)).collect();
            assert!(waits.iter().all(|w| *w < Duration::from_millis(ceiling)), "retry {retry}: {waits:?}");
            // Jitter: the waits are spread, not one value.
            assert!(waits.iter().any(|w| *w < Duration::from_millis(ceiling / 2)), "retry {retry}");
            assert!(waits.iter().any(|w| *w >= Duration::from_millis(ceiling / 2)), "retry {retry}");
        }
    }

    #[test]
    fn a_long_retry_after_is_not_waited_for() {
        let r = Retry::default();
        assert_eq!(r.wait(0, Some(MAX_RETRY_AFTER + Duration::from_secs(1))), None);
        let w = r.wait(0, Some(Duration::from_secs(2))).unwrap();
        assert!(w >= Duration::from_secs(2) && w < Duration::from_millis(2500), "{w:?}");
    }
}
