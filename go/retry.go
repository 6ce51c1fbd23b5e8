package densewire

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RetryPolicy says which failed requests a Client sends again, and how long it waits before each
// retry: SPEC.md section 18, the schedule of every densewire client. Retried are: a 429 (rate
// limited: the server's admission is full), a 503 (unavailable: the model or a table is loading, or
// the server is draining), and a connection that failed before any byte of an answer came back
// (refused, reset, closed). A 4xx that is the caller's fault (400, 401, 404, 413, 422, ...), a 500,
// 502 or 504, an answer that fails to decode and a cancelled ctx are never retried.
//
// The wait before retry n (1, 2, ...) is a full-jitter exponential backoff, draw × min(MaxDelay,
// BaseDelay·2^(n-1)) with draw uniform in [0, 1), added on top of the server's Retry-After
// (delay-seconds or an HTTP date) when it sent one: never earlier than the server asked, and clients
// told the same Retry-After do not all come back at the same instant. A Retry-After over a minute is
// not waited for: the *Error comes at once, with RetryAfter set. A cancelled ctx ends the wait at
// once with ctx.Err().
type RetryPolicy struct {
	// MaxRetries is how many times one request is sent again after its first attempt; 0 means never.
	MaxRetries int
	// BaseDelay is the bound of the first backoff; 0 means 500 ms, a negative one no backoff at all
	// (a retry waits only for Retry-After).
	BaseDelay time.Duration
	// MaxDelay caps one backoff (not Retry-After); 0 means 8 s.
	MaxDelay time.Duration
	// Rand is the source of the jitter's draws, uniform in [0, 1); nil means math/rand/v2's Float64.
	// A seeded generator makes the schedule reproducible; a constant tests one wait.
	Rand func() float64
}

// DefaultRetryPolicy is the policy of a Client whose Retry is nil: 2 retries (as the OpenAI SDKs),
// backoff from 500 ms up to 8 s.
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 2, BaseDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second}

// MaxRetryAfter is the longest Retry-After a Client waits for; past it, it gives up at once.
const MaxRetryAfter = time.Minute

func (c *Client) retryPolicy() RetryPolicy {
	p := DefaultRetryPolicy
	if c.Retry != nil {
		p = *c.Retry
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultRetryPolicy.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultRetryPolicy.MaxDelay
	}
	p.MaxRetries = max(p.MaxRetries, 0)
	return p
}

// backoffSeconds is the jitter of retry n in seconds, in SPEC.md 18.2's binary64 operations: a
// draw times min(cap, base·2^(n-1)) (the cap when 2^(n-1) overflows).
func (p RetryPolicy) backoffSeconds(n int) float64 {
	base, ceiling := p.BaseDelay, p.MaxDelay
	if base == 0 {
		base = DefaultRetryPolicy.BaseDelay
	}
	base = max(base, 0)
	if ceiling <= 0 {
		ceiling = DefaultRetryPolicy.MaxDelay
	}
	bound := math.Min(ceiling.Seconds(), base.Seconds()*math.Pow(2, float64(n-1)))
	draw := rand.Float64
	if p.Rand != nil {
		draw = p.Rand
	}
	return draw() * bound
}

// Backoff is the full-jitter wait before retry n (1, 2, ...) without a Retry-After: a draw times
// min(MaxDelay, BaseDelay·2^(n-1)), rounded up to the nanosecond. Zero delays are the defaults.
func (p RetryPolicy) Backoff(n int) time.Duration {
	return secondsDuration(p.backoffSeconds(n))
}

// Wait is SPEC.md 18.2, the retry loop's only rule: the seconds to wait before retry n (1 for the
// first) of a request that failed with status (0: the connection failed before any answer) and
// this Retry-After header value ("" when absent), now being the client's clock; ok is false to give
// up (a status not retried, the retries spent, or a Retry-After over MaxRetryAfter).
func (p RetryPolicy) Wait(n, status int, retryAfter string, now time.Time) (seconds float64, ok bool) {
	if status != 0 && !retryableStatus(status) {
		return 0, false
	}
	if n > p.MaxRetries {
		return 0, false
	}
	ra, has := retryAfterSeconds(retryAfter, now)
	if has && ra > MaxRetryAfter.Seconds() {
		return 0, false
	}
	jitter := p.backoffSeconds(n)
	if !has {
		return jitter, true
	}
	return ra + jitter, true
}

// secondsDuration rounds seconds up to whole nanoseconds: a timer never fires before Retry-After.
func secondsDuration(seconds float64) time.Duration {
	if seconds >= math.MaxInt64/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(seconds * 1e9))
}

// retryAfterSeconds is SPEC.md 18.2 step 2: delay-seconds (ASCII digits, spaces and tabs around) or
// an HTTP date relative to now (a past one is 0); anything else is absent.
func retryAfterSeconds(value string, now time.Time) (float64, bool) {
	text := strings.Trim(value, " \t")
	if text == "" {
		return 0, false
	}
	digits := true
	for i := 0; i < len(text); i++ {
		digits = digits && text[i] >= '0' && text[i] <= '9'
	}
	if digits {
		secs, err := strconv.ParseFloat(text, 64) // exact for any integer of 15 digits, never an error for digits
		return secs, err == nil || errors.Is(err, strconv.ErrRange)
	}
	if len(text) < 3 || !isLetter(text[0]) || !isLetter(text[1]) || !isLetter(text[2]) {
		return 0, false
	}
	at, err := http.ParseTime(text)
	if err != nil {
		return 0, false
	}
	nowSeconds := float64(now.Unix()) + float64(now.Nanosecond())/1e9
	return max(float64(at.Unix())-nowSeconds, 0), true
}

func isLetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

// ParseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3, SPEC.md 18.2): delay-seconds
// or an HTTP date, relative to now. A date in the past is 0; a missing or unreadable value is (0,
// false). The value is not capped: a Client gives up on one over MaxRetryAfter.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	secs, ok := retryAfterSeconds(value, now)
	if !ok {
		return 0, false
	}
	return secondsDuration(secs), true
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
		var wait float64
		var again bool
		resp, err := hc.Do(r)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case err != nil:
			if connectionFailed(err) {
				wait, again = policy.Wait(attempt, 0, "", time.Now())
			}
			if !again {
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
			retryAfter := resp.Header.Get("Retry-After")
			wait, again = policy.Wait(attempt, resp.StatusCode, retryAfter, time.Now())
			if !again {
				e := ParseErrorResponse(resp.StatusCode, c.decompressError(resp, body))
				e.Attempts = attempt
				if retryableStatus(resp.StatusCode) {
					e.RetryAfter, _ = ParseRetryAfter(retryAfter, time.Now())
				}
				return nil, nil, e
			}
		}
		timer := time.NewTimer(secondsDuration(wait))
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
