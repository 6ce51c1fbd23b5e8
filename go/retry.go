package densewire

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RetryPolicy says which failed requests a Client sends again, and how long it waits before each
// retry. Retried are: a 429 (rate limited: the server's admission is full), a 503 (unavailable: the
// model or a table is loading, or the server is draining), and a connection that failed before any
// byte of an answer came back (refused, reset, closed). A 4xx that is the caller's fault (400, 401,
// 404, 413, 422, ...) is never retried, nor an answer that fails to decode, nor a cancelled ctx.
//
// The wait before retry n (1, 2, ...) is a full-jitter exponential backoff, a uniformly random
// duration in [0, min(MaxDelay, BaseDelay*2^(n-1))), added to the server's Retry-After (delay-seconds
// or an HTTP date, at most a minute) when it sent one: never earlier than the server asked, and
// clients told the same Retry-After do not all come back at the same instant. A cancelled ctx ends
// the wait at once with ctx.Err().
type RetryPolicy struct {
	// MaxRetries is how many times one request is sent again after its first attempt; 0 means never.
	MaxRetries int
	// BaseDelay is the bound of the first backoff; 0 means 500 ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff (not Retry-After); 0 means 8 s.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is the policy of a Client whose Retry is nil: 2 retries (as the OpenAI SDKs),
// backoff from 500 ms up to 8 s.
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 2, BaseDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second}

// maxRetryAfter bounds how long a server's Retry-After makes the client wait.
const maxRetryAfter = time.Minute

func (c *Client) retryPolicy() RetryPolicy {
	p := DefaultRetryPolicy
	if c.Retry != nil {
		p = *c.Retry
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultRetryPolicy.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultRetryPolicy.MaxDelay
	}
	p.MaxRetries = max(p.MaxRetries, 0)
	return p
}

// Backoff is the full-jitter wait before retry n (1, 2, ...) without a Retry-After: uniform in
// [0, min(MaxDelay, BaseDelay*2^(n-1))). Zero delays are replaced by the defaults.
func (p RetryPolicy) Backoff(n int) time.Duration {
	base, ceiling := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = DefaultRetryPolicy.BaseDelay
	}
	if ceiling <= 0 {
		ceiling = DefaultRetryPolicy.MaxDelay
	}
	bound := ceiling
	if shift := n - 1; shift < 62 && base <= ceiling>>shift {
		bound = min(base<<shift, ceiling)
	}
	if bound <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(bound)))
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3): delay-seconds or an HTTP
// date, relative to now. A date in the past is 0; a missing or unreadable value is (0, false).
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil {
		if secs < 0 || secs != secs {
			return 0, false
		}
		return time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second)), true
	}
	if at, err := http.ParseTime(value); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// retryableStatus: the server did not do the work and says to come back.
func retryableStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// connectionFailed reports whether err (of http.Client.Do, so before any byte of an answer was
// read) is the connection failing: refused, reset, closed early. Not a bad URL, TLS failure or
// timeout of the caller's context.
func connectionFailed(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// do sends the request, retrying under the client's RetryPolicy, and reads the (still encoded)
// body. A 2xx or 304 answer is returned; any other status is an *Error from the answer's envelope,
// and a connection that kept failing an Unavailable *Error wrapping the cause; both say in
// Attempts how many times the request was sent. A cancelled ctx is ctx.Err().
func (c *Client) do(req *http.Request) (*http.Response, []byte, error) {
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx := req.Context()
	policy := c.retryPolicy()
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 { // a fresh request, and a fresh body reader, for each attempt
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, nil, err
				}
				r.Body = body
			}
		}
		var wait time.Duration
		resp, err := hc.Do(r)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case err != nil:
			if !connectionFailed(err) || attempt > policy.MaxRetries {
				e := newError(Unavailable, "", -1, req.Method+" "+req.URL.Path+": "+err.Error())
				e.Err, e.Attempts = err, attempt
				return nil, nil, e
			}
		default:
			body, err := c.readAnswer(resp)
			if err != nil {
				return nil, nil, err
			}
			if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
				return resp, body, nil
			}
			if !retryableStatus(resp.StatusCode) || attempt > policy.MaxRetries {
				e := ParseErrorResponse(resp.StatusCode, c.decompressError(resp, body))
				e.Attempts = attempt
				return nil, nil, e
			}
			wait, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		timer := time.NewTimer(wait + policy.Backoff(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// readAnswer reads the body of one answer and closes it.
func (c *Client) readAnswer(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return readBody(resp, c.MaxResponseBytes)
}
